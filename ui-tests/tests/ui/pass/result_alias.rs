// Pins: a crate's own `type Result<T> = …` alias, and an alias whose name
// is not `Result` at all.
use std::sync::LazyLock;
use std::sync::atomic::{AtomicU32, Ordering};

use idem::{Idempotency, MemoryStore, idempotent};

static IDEM: LazyLock<Idempotency> = LazyLock::new(|| Idempotency::new(MemoryStore::new()));
static RUNS: AtomicU32 = AtomicU32::new(0);

#[derive(Debug)]
pub struct AppError(String);

impl From<idem::Error> for AppError {
    fn from(error: idem::Error) -> Self {
        AppError(error.to_string())
    }
}

pub type Result<T> = std::result::Result<T, AppError>;
pub type Outcome = std::result::Result<Vec<u8>, AppError>;

#[idempotent(store = IDEM)]
async fn charge(order: String) -> Result<u32> {
    let _ = order;
    Ok(RUNS.fetch_add(1, Ordering::SeqCst))
}

#[idempotent(store = IDEM)]
async fn export(order: String) -> Outcome {
    Ok(order.into_bytes())
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let first = charge("order-1".into()).await.unwrap();
    assert_eq!(charge("order-1".into()).await.unwrap(), first);
    assert_eq!(RUNS.load(Ordering::SeqCst), 1);
    assert_eq!(export("ab".into()).await.unwrap(), b"ab");
    let _ = AppError(String::new()).0;
}
