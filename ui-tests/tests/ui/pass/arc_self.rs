// Pins: a method taking `self: Arc<Self>`, with `store = self.idem`.
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

use idem::{Idempotency, MemoryStore, idempotent};

struct Worker {
    idem: Idempotency,
    runs: AtomicU32,
}

impl Worker {
    #[idempotent(store = self.idem)]
    async fn handle(self: Arc<Self>, message_id: u64) -> Result<u32, idem::Error> {
        let _ = message_id;
        Ok(self.runs.fetch_add(1, Ordering::SeqCst))
    }
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let worker = Arc::new(Worker {
        idem: Idempotency::new(MemoryStore::new()),
        runs: AtomicU32::new(0),
    });
    let first = Arc::clone(&worker).handle(1).await.unwrap();
    assert_eq!(Arc::clone(&worker).handle(1).await.unwrap(), first);
    assert_eq!(worker.runs.load(Ordering::SeqCst), 1);
}
