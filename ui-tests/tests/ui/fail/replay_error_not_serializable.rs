// Pins: `errors = "replay"` with an error type that is not serializable is
// one error, at "replay".
use idem::idempotent;

#[derive(Debug)]
enum ChargeError {
    Declined,
    Idem(idem::Error),
}

impl From<idem::Error> for ChargeError {
    fn from(error: idem::Error) -> Self {
        ChargeError::Idem(error)
    }
}

#[idempotent(errors = "replay")]
async fn charge(order: String) -> Result<u64, ChargeError> {
    if order.is_empty() {
        return Err(ChargeError::Declined);
    }
    Ok(1)
}

fn main() {}
