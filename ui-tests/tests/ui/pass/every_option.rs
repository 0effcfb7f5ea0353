// Pins: every option at once, with a stored-error predicate: a declined
// card is replayed, a timeout is released and retried.
use std::sync::LazyLock;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use idem::{Idempotency, MemoryStore, idempotent};
use serde::{Deserialize, Serialize};

static IDEM: LazyLock<Idempotency> = LazyLock::new(|| Idempotency::new(MemoryStore::new()));
static RUNS: AtomicU32 = AtomicU32::new(0);

#[derive(Debug, PartialEq, Serialize, Deserialize)]
enum PayError {
    Declined,
    Timeout,
    Idem(String),
}

impl From<idem::Error> for PayError {
    fn from(error: idem::Error) -> Self {
        PayError::Idem(error.to_string())
    }
}

fn is_final(error: &PayError) -> bool {
    matches!(error, PayError::Declined)
}

#[derive(Serialize)]
struct Request {
    key: String,
    tenant: u64,
    amount: u64,
}

struct Client;

#[idempotent(
    key = req.key,
    scope = ("payments", req.tenant),
    ttl = "1h",
    lease = Duration::from_secs(10),
    wait = "100ms",
    tombstone = "30d",
    store = IDEM,
    fingerprint = (req.tenant, req.amount),
    skip(client),
    errors = is_final,
    mismatch = "refuse",
    crate = ::idem,
)]
async fn charge(client: &Client, req: Request) -> Result<u32, PayError> {
    let _ = client;
    let run = RUNS.fetch_add(1, Ordering::SeqCst);
    match req.amount {
        0 => Err(PayError::Declined),
        1 => Err(PayError::Timeout),
        _ => Ok(run),
    }
}

fn req(key: &str, amount: u64) -> Request {
    Request {
        key: key.into(),
        tenant: 7,
        amount,
    }
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let first = charge(&Client, req("a", 5)).await.unwrap();
    assert_eq!(charge(&Client, req("a", 5)).await.unwrap(), first);
    assert_eq!(charge(&Client, req("d", 0)).await, Err(PayError::Declined));
    assert_eq!(charge(&Client, req("d", 0)).await, Err(PayError::Declined));
    assert_eq!(charge(&Client, req("t", 1)).await, Err(PayError::Timeout));
    assert_eq!(charge(&Client, req("t", 1)).await, Err(PayError::Timeout));
    // 1 ok + 1 declined (stored) + 2 timeouts (released).
    assert_eq!(RUNS.load(Ordering::SeqCst), 4);
    assert!(matches!(charge(&Client, req("a", 6)).await, Err(PayError::Idem(_))));
}
