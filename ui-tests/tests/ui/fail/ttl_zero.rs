// Pins: a zero `ttl` is an error at the literal.
use idem::idempotent;

#[idempotent(ttl = "0s")]
async fn charge(order: String) -> Result<u64, idem::Error> {
    Ok(order.len() as u64)
}

fn main() {}
