//! Replays of spread keys: each key replayed once, about a round after its
//! first call, by a handle that did not complete it (so not answered from
//! the store's table of keys it saw completed), as retries arrive in real
//! traffic. Shared by the PostgreSQL and MySQL groups.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::harness::{Figures, Runner, measure, runner};
use crate::server_time::{Counters, ServerTime};

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
    RF: Future<Output = ()> + Send + 'static,
{
    around(concurrency, calls, first, replay, |replays| replays)
}

/// As [`runner_of`], the server's time over the replays added to
/// `subject`'s in `time`.
pub(crate) fn timed_runner_of<C, F, FF, R, RF>(
    (time, subject): (&Arc<ServerTime<C>>, &'static str),
    concurrency: usize,
    calls: u64,
    first: F,
    replay: R,
) -> Runner
where
    C: Counters,
    F: Fn(u64) -> FF + Clone + Send + Sync + 'static,
    FF: Future<Output = ()> + Send,
    R: Fn(u64) -> RF + Clone + Send + Sync + 'static,
    RF: Future<Output = ()> + Send + 'static,
{
    let time = time.clone();
    around(concurrency, calls, first, replay, move |replays| {
        let time = time.clone();
        Box::pin(async move { time.over(subject, calls, replays).await })
    })
}

type Round = Pin<Box<dyn Future<Output = Figures>>>;

/// A round whose timed replays run inside `timed`.
fn around<F, FF, R, RF>(
    concurrency: usize,
    calls: u64,
    first: F,
    replay: R,
    timed: impl Fn(Round) -> Round + Clone + 'static,
) -> Runner
where
    F: Fn(u64) -> FF + Clone + Send + Sync + 'static,
    FF: Future<Output = ()> + Send,
    R: Fn(u64) -> RF + Clone + Send + Sync + 'static,
    RF: Future<Output = ()> + Send + 'static,
{
    assert_eq!(calls % SEEDING as u64, 0, "every key called first");
    runner(move || {
        let (first, replay, timed) = (first.clone(), replay.clone(), timed.clone());
        async move {
            let base = NEXT.fetch_add(calls, Ordering::Relaxed);
            let seeded = Arc::new(AtomicU64::new(base));
            measure(SEEDING, calls, move |_| {
                first(seeded.fetch_add(1, Ordering::Relaxed))
            })
            .await;
            let replayed = Arc::new(AtomicU64::new(base));
            let replays = measure(concurrency, calls, move |_| {
                replay(replayed.fetch_add(1, Ordering::Relaxed))
            });
            timed(Box::pin(replays)).await
        }
    })
}
