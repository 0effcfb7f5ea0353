// Pins: every parameter skipped, with an explicit key: nothing needs to be
// serializable, and `errors = "replay"` stores the error.
use std::sync::LazyLock;
use std::sync::atomic::{AtomicU32, Ordering};

use idem::{Idempotency, MemoryStore, idempotent};
use serde::{Deserialize, Serialize};

static IDEM: LazyLock<Idempotency> = LazyLock::new(|| Idempotency::new(MemoryStore::new()));

struct Pool {
    runs: AtomicU32,
}

#[derive(Debug, PartialEq, Serialize, Deserialize)]
enum JobError {
    Failed(u32),
    Idem(String),
}

impl From<idem::Error> for JobError {
    fn from(error: idem::Error) -> Self {
        JobError::Idem(error.to_string())
    }
}

#[idempotent(key = "nightly-report", store = IDEM, skip(pool, fail), errors = "replay")]
async fn nightly(pool: &Pool, fail: bool) -> Result<u32, JobError> {
    let run = pool.runs.fetch_add(1, Ordering::SeqCst);
    if fail { Err(JobError::Failed(run)) } else { Ok(run) }
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let pool = Pool {
        runs: AtomicU32::new(0),
    };
    assert_eq!(nightly(&pool, true).await, Err(JobError::Failed(0)));
    assert_eq!(nightly(&pool, false).await, Err(JobError::Failed(0)));
    assert_eq!(pool.runs.load(Ordering::SeqCst), 1);
}
