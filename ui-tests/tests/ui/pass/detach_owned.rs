// Pins: `detach` with owned parameters and `self: Arc<Self>` compiles; the
// call dropped by a timeout still completes and the retry replays it.
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use idem::{Idempotency, MemoryStore, idempotent};

struct Shipping {
    idem: Idempotency,
    runs: AtomicU32,
}

impl Shipping {
    #[idempotent(key = order_id, store = self.idem, wait = "5s", detach)]
    async fn ship(self: Arc<Self>, order_id: String) -> Result<u32, idem::Error> {
        self.runs.fetch_add(1, Ordering::SeqCst);
        tokio::time::sleep(Duration::from_millis(100)).await;
        Ok(order_id.len() as u32)
    }
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let shipping = Arc::new(Shipping {
        idem: Idempotency::new(MemoryStore::new()),
        runs: AtomicU32::new(0),
    });
    let dropped = tokio::time::timeout(Duration::from_millis(10), shipping.clone().ship("o-1".into()));
    assert!(dropped.await.is_err());
    assert_eq!(shipping.clone().ship("o-1".into()).await.unwrap(), 3);
    assert_eq!(shipping.runs.load(Ordering::SeqCst), 1);
}
