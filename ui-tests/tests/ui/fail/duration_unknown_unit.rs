// Pins: a duration with an unknown unit (`"24x"`) is an error at the
// literal.
use idem::idempotent;

#[idempotent(ttl = "24x")]
async fn charge(order: String) -> Result<u64, idem::Error> {
    Ok(order.len() as u64)
}

fn main() {}
