// Pins: an unknown error policy (`errors = "retry"`) is an error at the
// literal, listing the policies.
use idem::idempotent;

#[idempotent(errors = "retry")]
async fn charge(order: String) -> Result<u64, idem::Error> {
    Ok(order.len() as u64)
}

fn main() {}
