// Pins: a free `async fn` with the default handle (`idem::install`), a
// derived key: runs once, replays, and a different payload is another key.
use std::sync::atomic::{AtomicU32, Ordering};

use idem::{Idempotency, MemoryStore, idempotent};

static RUNS: AtomicU32 = AtomicU32::new(0);

#[idempotent]
async fn charge(order: String, amount: u64) -> Result<u32, idem::Error> {
    let _ = (order, amount);
    Ok(RUNS.fetch_add(1, Ordering::SeqCst))
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    idem::install(Idempotency::new(MemoryStore::new()));
    let first = charge("order-1".into(), 5).await.unwrap();
    assert_eq!(charge("order-1".into(), 5).await.unwrap(), first);
    assert_ne!(charge("order-2".into(), 5).await.unwrap(), first);
    assert_eq!(RUNS.load(Ordering::SeqCst), 2);
}
