// Pins: the example in the rustdoc of `idem_macros::idempotent` (every
// option but `fingerprint`, `skip` and `crate`) compiles and replays.
use std::sync::LazyLock;
use std::sync::atomic::{AtomicU64, Ordering};

use idem::{Idempotency, MemoryStore, idempotent};
use serde::{Deserialize, Serialize};

static IDEM: LazyLock<Idempotency> = LazyLock::new(|| Idempotency::new(MemoryStore::new()));
static CHARGES: AtomicU64 = AtomicU64::new(0);

#[derive(Serialize, Deserialize)]
struct ChargeRequest {
    idempotency_key: String,
    tenant: u64,
    amount_cents: u64,
}

#[idempotent(
    key = req.idempotency_key,        // else: a hash of the parameters not skipped
    scope = ("payments", req.tenant), // else: module path and fn name
    ttl = "24h",                      // how long the result is replayed
    lease = "30s",                    // how long a crashed caller's claim blocks the key
    wait = "2s",                      // how long a duplicate waits for a call in progress
    store = IDEM,                     // else: the handle given to `idem::install`
    errors = "release",               // or "replay", or a `fn(&E) -> bool`
)]
async fn charge(req: ChargeRequest) -> Result<u64, idem::Error> {
    // Runs once per key: the charge id is stored and replayed.
    Ok(CHARGES.fetch_add(req.amount_cents, Ordering::SeqCst))
}

#[tokio::main]
async fn main() {
    let req = || ChargeRequest {
        idempotency_key: "order-1".into(),
        tenant: 7,
        amount_cents: 1200,
    };
    let first = charge(req()).await.unwrap();
    assert_eq!(charge(req()).await.unwrap(), first); // replayed
    assert_eq!(CHARGES.load(Ordering::SeqCst), 1200); // charged once
}
