// Pins: an `impl Trait` parameter that is not serializable, left out with
// `skip`; the other parameters still make the key.
use std::fmt::Display;
use std::sync::LazyLock;

use idem::{Idempotency, MemoryStore, idempotent};

static IDEM: LazyLock<Idempotency> = LazyLock::new(|| Idempotency::new(MemoryStore::new()));

#[idempotent(store = IDEM, skip(label))]
async fn describe(label: impl Display + Send, order: u64) -> Result<String, idem::Error> {
    Ok(format!("{label} {order}"))
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    assert_eq!(describe("first", 1).await.unwrap(), "first 1");
    // Same order: replayed, whatever the skipped label says.
    assert_eq!(describe('x', 1).await.unwrap(), "first 1");
    assert_eq!(describe("second", 2).await.unwrap(), "second 2");
}
