// Pins: an error type without `From<idem::Error>` is one error, at the
// error type.
use idem::idempotent;

#[derive(Debug)]
enum ChargeError {
    Declined,
}

#[idempotent]
async fn charge(order: String) -> Result<u64, ChargeError> {
    if order.is_empty() {
        return Err(ChargeError::Declined);
    }
    Ok(1)
}

fn main() {}
