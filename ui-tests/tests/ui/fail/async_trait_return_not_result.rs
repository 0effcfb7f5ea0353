// Pins: as `return_not_result.rs`, on a method of an `#[async_trait]` impl: the same
// error at the same token as on a native `async fn`.
use async_trait::async_trait;
use idem::idempotent;

#[async_trait]
trait Charge {
    async fn charge(&self, order: String) -> u64;
}

struct Charger;

#[async_trait]
impl Charge for Charger {
    #[idempotent]
    async fn charge(&self, order: String) -> u64 {
        order.len() as u64
    }
}

fn main() {}
