// Pins: every mistake in one attribute is reported at once, each at its
// token (a misspelled option, a malformed duration, a repeated option, a
// skip naming no parameter).
use idem::idempotent;

#[idempotent(scpoe = "payments", ttl = "1y", wait = "1s", wait = "2s", skip(orders))]
async fn charge(order: String) -> Result<u64, idem::Error> {
    Ok(order.len() as u64)
}

fn main() {}
