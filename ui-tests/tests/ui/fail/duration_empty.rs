// Pins: an empty duration (`""`) is an error at the literal.
use idem::idempotent;

#[idempotent(lease = "")]
async fn charge(order: String) -> Result<u64, idem::Error> {
    Ok(order.len() as u64)
}

fn main() {}
