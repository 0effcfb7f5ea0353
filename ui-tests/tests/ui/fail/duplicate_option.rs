// Pins: an option given twice is an error at the second, pointing back at
// the first.
use idem::idempotent;

#[idempotent(ttl = "1h", scope = "payments", ttl = "2h")]
async fn charge(order: String) -> Result<u64, idem::Error> {
    Ok(order.len() as u64)
}

fn main() {}
