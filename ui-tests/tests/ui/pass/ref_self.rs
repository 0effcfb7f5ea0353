// Pins: a method taking `&self`, with `store = self.idem`.
use std::sync::atomic::{AtomicU32, Ordering};

use idem::{Idempotency, MemoryStore, idempotent};

struct Payments {
    idem: Idempotency,
    runs: AtomicU32,
}

impl Payments {
    #[idempotent(store = self.idem, key = order)]
    async fn charge(&self, order: &str) -> Result<u32, idem::Error> {
        Ok(self.runs.fetch_add(1, Ordering::SeqCst))
    }
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let payments = Payments {
        idem: Idempotency::new(MemoryStore::new()),
        runs: AtomicU32::new(0),
    };
    let first = payments.charge("order-1").await.unwrap();
    assert_eq!(payments.charge("order-1").await.unwrap(), first);
    assert_eq!(payments.runs.load(Ordering::SeqCst), 1);
}
