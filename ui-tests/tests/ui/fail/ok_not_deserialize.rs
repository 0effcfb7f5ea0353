// Pins: an `Ok` type without `Deserialize` is one error, at the `Ok` type.
use idem::idempotent;
use serde::Serialize;

#[derive(Serialize)]
struct Receipt {
    id: u64,
}

#[idempotent]
async fn charge(order: String) -> Result<Receipt, idem::Error> {
    Ok(Receipt { id: order.len() as u64 })
}

fn main() {}
