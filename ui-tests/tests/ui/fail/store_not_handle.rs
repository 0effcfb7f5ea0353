// Pins: `store = expr` that is not an `Idempotency` (nor derefs to one) is
// one error at the expression.
use idem::idempotent;

static STORE: &str = "redis://localhost";

#[idempotent(store = STORE)]
async fn charge(order: String) -> Result<u64, idem::Error> {
    Ok(order.len() as u64)
}

fn main() {}
