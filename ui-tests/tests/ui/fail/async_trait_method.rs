// Pins: a method already rewritten by `#[async_trait]` is recognised: the
// error names `async_trait` and the two ways out.
use async_trait::async_trait;
use idem::idempotent;

#[async_trait]
trait Billing {
    async fn bill(&self, order: String) -> Result<u64, idem::Error>;
}

struct Biller;

#[async_trait]
impl Billing for Biller {
    #[idempotent(key = order)]
    async fn bill(&self, order: String) -> Result<u64, idem::Error> {
        Ok(order.len() as u64)
    }
}

fn main() {}
