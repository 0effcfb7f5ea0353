//! Replays of spread keys: each key replayed once, about a round after its
//! first call, by a handle that did not complete it (so not answered from
//! the store's table of keys it saw completed), as retries arrive in real
//! traffic. Shared by the PostgreSQL and MySQL groups.

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::harness::{Runner, measure, runner};

/// Keys of spread replays: far above the fresh scenarios' and below the
/// hot keys'.
static NEXT: AtomicU64 = AtomicU64::new(1 << 40);

/// Concurrency of the untimed first calls.
const SEEDING: usize = 32;

/// A round: `calls` new keys (a multiple of 32) each called once by
/// `first` (untimed), then each replayed once by `replay`, in the same
/// order (timed).
pub(crate) fn runner_of<F, FF, R, RF>(concurrency: usize, calls: u64, first: F, replay: R) -> Runner
where
    F: Fn(u64) -> FF + Clone + Send + Sync + 'static,
    FF: Future<Output = ()> + Send,
    R: Fn(u64) -> RF + Clone + Send + Sync + 'static,
    RF: Future<Output = ()> + Send,
{
    assert_eq!(calls % SEEDING as u64, 0, "every key called first");
    runner(move || {
        let (first, replay) = (first.clone(), replay.clone());
        async move {
            let base = NEXT.fetch_add(calls, Ordering::Relaxed);
            let seeded = Arc::new(AtomicU64::new(base));
            measure(SEEDING, calls, move |_| {
                first(seeded.fetch_add(1, Ordering::Relaxed))
            })
            .await;
            let replayed = Arc::new(AtomicU64::new(base));
            measure(concurrency, calls, move |_| {
                replay(replayed.fetch_add(1, Ordering::Relaxed))
            })
            .await
        }
    })
}
