// Pins: behind a type alias (`anyhow::Result<T>`), an `Ok` type without
// `Serialize` is still one error at the `Ok` type.
use idem::idempotent;

struct Receipt {
    id: u64,
}

#[idempotent]
async fn charge(order: String) -> anyhow::Result<Receipt> {
    Ok(Receipt { id: order.len() as u64 })
}

fn main() {}
