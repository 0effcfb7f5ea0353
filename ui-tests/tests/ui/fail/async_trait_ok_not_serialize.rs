// Pins: as `ok_not_serialize.rs`, on a method of an `#[async_trait]` impl: the same
// error at the same token as on a native `async fn`.
use async_trait::async_trait;
use idem::idempotent;
use serde::Deserialize;

#[derive(Deserialize)]
struct Receipt {
    id: u64,
}

#[async_trait]
trait Charge {
    async fn charge(&self, order: String) -> Result<Receipt, idem::Error>;
}

struct Charger;

#[async_trait]
impl Charge for Charger {
    #[idempotent]
    async fn charge(&self, order: String) -> Result<Receipt, idem::Error> {
        Ok(Receipt { id: order.len() as u64 })
    }
}

fn main() {}
