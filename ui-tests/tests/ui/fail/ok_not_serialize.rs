// Pins: an `Ok` type without `Serialize` is one error, at the `Ok` type.
use idem::idempotent;
use serde::Deserialize;

#[derive(Deserialize)]
struct Receipt {
    id: u64,
}

#[idempotent]
async fn charge(order: String) -> Result<Receipt, idem::Error> {
    Ok(Receipt { id: order.len() as u64 })
}

fn main() {}
