// Pins: a method of an `#[async_trait]` impl (the shape tonic's service
// traits have), annotated directly: async-trait has already rewritten it
// into a fn returning a boxed future, and the attribute wraps the block
// inside `Box::pin(async move { … })`. Called twice, the body runs once;
// `self` in `key = …` and `store = …`, a borrowed parameter and an
// `Arc<Self>` receiver all work as on a native `async fn`.
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

use async_trait::async_trait;
use idem::{Idempotency, MemoryStore, idempotent};

#[async_trait]
trait Billing {
    async fn bill(&self, order: String) -> Result<u32, idem::Error>;
    async fn refund(&self, order: &str, cents: u64) -> Result<u32, idem::Error>;
    async fn close(self: Arc<Self>) -> Result<u32, idem::Error>;
}

struct Biller {
    idem: Idempotency,
    runs: AtomicU32,
    account: u64,
}

#[async_trait]
impl Billing for Biller {
    #[idempotent(store = self.idem, key = order, scope = ("bill", self.account))]
    async fn bill(&self, order: String) -> Result<u32, idem::Error> {
        Ok(self.runs.fetch_add(1, Ordering::SeqCst) + order.len() as u32)
    }

    #[idempotent(store = self.idem)]
    async fn refund(&self, order: &str, cents: u64) -> Result<u32, idem::Error> {
        let _ = (order, cents);
        Ok(self.runs.fetch_add(1, Ordering::SeqCst))
    }

    #[idempotent(store = self.idem, key = self.account)]
    async fn close(self: Arc<Self>) -> Result<u32, idem::Error> {
        Ok(self.runs.fetch_add(1, Ordering::SeqCst))
    }
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let biller = Arc::new(Biller {
        idem: Idempotency::new(MemoryStore::new()),
        runs: AtomicU32::new(0),
        account: 7,
    });
    let first = biller.bill("o-1".into()).await.unwrap();
    assert_eq!(biller.bill("o-1".into()).await.unwrap(), first);
    let refund = biller.refund("o-1", 5).await.unwrap();
    assert_eq!(biller.refund("o-1", 5).await.unwrap(), refund);
    let closed = biller.clone().close().await.unwrap();
    assert_eq!(biller.clone().close().await.unwrap(), closed);
    assert_eq!(biller.runs.load(Ordering::SeqCst), 3);
}
