// Pins: `anyhow::Result<T>` as the return type (an alias: the error type
// is not spelled out).
use std::sync::LazyLock;
use std::sync::atomic::{AtomicU32, Ordering};

use idem::{Idempotency, MemoryStore, idempotent};

static IDEM: LazyLock<Idempotency> = LazyLock::new(|| Idempotency::new(MemoryStore::new()));
static RUNS: AtomicU32 = AtomicU32::new(0);

#[idempotent(store = IDEM)]
async fn charge(order: String) -> anyhow::Result<u32> {
    anyhow::ensure!(!order.is_empty(), "empty order");
    Ok(RUNS.fetch_add(1, Ordering::SeqCst))
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let first = charge("order-1".into()).await.unwrap();
    assert_eq!(charge("order-1".into()).await.unwrap(), first);
    assert!(charge(String::new()).await.is_err());
    assert_eq!(RUNS.load(Ordering::SeqCst), 1);
}
