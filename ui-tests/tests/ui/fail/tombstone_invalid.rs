// Pins: a zero `tombstone` is an error at the literal (leave the option
// out for none), and so is one that is not a duration.
use idem::idempotent;

#[idempotent(tombstone = "0d")]
async fn charge(order: String) -> Result<u64, idem::Error> {
    Ok(order.len() as u64)
}

#[idempotent(tombstone = "30 days")]
async fn refund(order: String) -> Result<u64, idem::Error> {
    Ok(order.len() as u64)
}

fn main() {}
