// Pins: `key = expr` whose type is not a `KeyPart` is one error at the
// expression.
use idem::idempotent;

struct OrderId(u64);

#[idempotent(key = order, fingerprint = false)]
async fn charge(order: OrderId) -> Result<u64, idem::Error> {
    Ok(order.0)
}

fn main() {}
