// Pins: a negative duration (`"-1s"`) is an error at the literal.
use idem::idempotent;

#[idempotent(wait = "-1s")]
async fn charge(order: String) -> Result<u64, idem::Error> {
    Ok(order.len() as u64)
}

fn main() {}
