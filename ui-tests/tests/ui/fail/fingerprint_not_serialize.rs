// Pins: `fingerprint = expr` whose type is not `Serialize` is one error at
// the expression.
use idem::idempotent;

struct Payload {
    amount: u64,
}

#[idempotent(key = order, fingerprint = payload)]
async fn charge(order: String, payload: Payload) -> Result<u64, idem::Error> {
    Ok(order.len() as u64 + payload.amount)
}

fn main() {}
