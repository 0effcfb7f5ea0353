// Pins: `errors = path` naming a fn that does not take `&E` is an error at
// the path.
use idem::idempotent;
use serde::{Deserialize, Serialize};

#[derive(Debug, Serialize, Deserialize)]
enum ChargeError {
    Declined,
    Idem(String),
}

impl From<idem::Error> for ChargeError {
    fn from(error: idem::Error) -> Self {
        ChargeError::Idem(error.to_string())
    }
}

fn is_final(error: ChargeError) -> bool {
    matches!(error, ChargeError::Declined)
}

#[idempotent(errors = is_final)]
async fn charge(order: String) -> Result<u64, ChargeError> {
    if order.is_empty() {
        return Err(ChargeError::Declined);
    }
    Ok(1)
}

fn main() {}
