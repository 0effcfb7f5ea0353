// Pins: `crate = path` for a crate that re-exports idem under another name.
use std::sync::LazyLock;

mod facade {
    pub use ::idem as runtime;
}

use facade::runtime::{Idempotency, MemoryStore, idempotent};

static IDEM: LazyLock<Idempotency> = LazyLock::new(|| Idempotency::new(MemoryStore::new()));

#[idempotent(crate = facade::runtime, store = IDEM)]
async fn charge(order: String) -> Result<String, facade::runtime::Error> {
    Ok(format!("charged {order}"))
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    assert_eq!(charge("o-1".into()).await.unwrap(), "charged o-1");
    assert_eq!(charge("o-1".into()).await.unwrap(), "charged o-1");
}
