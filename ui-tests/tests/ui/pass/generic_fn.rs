// Pins: a generic fn whose parameter has a `T: Serialize` bound is hashed
// into the derived key; a generic `Ok` type works too.
use std::sync::LazyLock;
use std::sync::atomic::{AtomicU32, Ordering};

use idem::{Idempotency, MemoryStore, idempotent};
use serde::Serialize;
use serde::de::DeserializeOwned;

static IDEM: LazyLock<Idempotency> = LazyLock::new(|| Idempotency::new(MemoryStore::new()));
static RUNS: AtomicU32 = AtomicU32::new(0);

#[idempotent(store = IDEM)]
async fn process<T: Serialize + Send, R: Serialize + DeserializeOwned + Default>(
    item: T,
) -> Result<(u32, R), idem::Error> {
    let _ = item;
    Ok((RUNS.fetch_add(1, Ordering::SeqCst), R::default()))
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let first: (u32, String) = process("a").await.unwrap();
    assert_eq!(process::<_, String>("a").await.unwrap(), first);
    assert_eq!(process::<_, String>(vec![1, 2]).await.unwrap().0, 1);
    assert_eq!(RUNS.load(Ordering::SeqCst), 2);
}
