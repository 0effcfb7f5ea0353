// Pins: a literal `lease` longer than a literal `ttl` is an error at the
// lease.
use idem::idempotent;

#[idempotent(ttl = "1m", lease = "5m")]
async fn charge(order: String) -> Result<u64, idem::Error> {
    Ok(order.len() as u64)
}

fn main() {}
