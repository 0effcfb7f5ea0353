// Pins: a return type that is not a `Result` is one error, at that type.
use idem::idempotent;

#[idempotent]
async fn charge(order: String) -> u64 {
    order.len() as u64
}

fn main() {}
