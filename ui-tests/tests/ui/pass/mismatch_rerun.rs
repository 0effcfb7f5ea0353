// Pins: `mismatch = "rerun"` keyed by the resource: the same update
// replays, another runs and replaces the record, the first again runs.
use std::sync::atomic::{AtomicU32, Ordering};

use idem::{Idempotency, MemoryStore, idempotent};

static RUNS: AtomicU32 = AtomicU32::new(0);

#[idempotent(key = order, mismatch = "rerun")]
async fn set_status(order: u64, status: String) -> Result<String, idem::Error> {
    RUNS.fetch_add(1, Ordering::SeqCst);
    Ok(format!("order {order} is {status}"))
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    idem::install(Idempotency::new(MemoryStore::new()));
    for (status, runs) in [("paid", 1), ("paid", 1), ("shipped", 2), ("paid", 3)] {
        let out = set_status(7, status.to_owned()).await.unwrap();
        assert_eq!(out, format!("order 7 is {status}"));
        assert_eq!(RUNS.load(Ordering::SeqCst), runs);
    }
}
