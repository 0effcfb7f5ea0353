// Pins: `#[idempotent]` on a fn that is not `async` is an error at `fn`.
use idem::idempotent;

#[idempotent]
fn charge(order: String) -> Result<u64, idem::Error> {
    Ok(order.len() as u64)
}

fn main() {}
