// Pins: `mismatch` takes a string literal, not an expression: an error at
// the expression, naming the two policies.
use idem::idempotent;

#[idempotent(key = order, mismatch = true)]
async fn set_status(order: u64, status: String) -> Result<usize, idem::Error> {
    Ok(status.len() + order as usize)
}

fn main() {}
