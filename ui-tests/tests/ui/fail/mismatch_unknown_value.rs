// Pins: an unknown mismatch policy (`mismatch = "replace"`) is an error at
// the literal, naming the two policies.
use idem::idempotent;

#[idempotent(key = order, mismatch = "replace")]
async fn set_status(order: u64, status: String) -> Result<usize, idem::Error> {
    Ok(status.len() + order as usize)
}

fn main() {}
