//! A purge run in-process every period: [`spawn_purge`] and the task it
//! returns, [`PurgeTask`].

use std::sync::{Arc, Mutex};
use std::time::Duration;

use idem_contract::admin::{Admin, Purge, Purged};
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio::time::{Instant, MissedTickBehavior};

use crate::Error;

/// Runs [`Admin::purge_with`]`(options)` on `store` every `every`, on a
/// task of its own in the current tokio runtime, until the returned
/// [`PurgeTask`] is dropped or [shut down](PurgeTask::shutdown). The
/// first purge runs one period after the spawn (replicas started together
/// do not all purge at once on start-up); a purge that outlasts the period
/// delays the next one instead of starting it at once. A failed purge is
/// logged (`tracing`, warn) and counted; the next period tries again.
/// Run one per database, not one per replica: two purges at once only
/// compete for the same rows.
///
/// Fails with [`Error::InvalidOption`] outside a tokio runtime or for a
/// zero period.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), idem::Error> {
/// use std::{sync::Arc, time::Duration};
/// use idem::admin::{Purge, spawn_purge};
///
/// let store = Arc::new(idem::MemoryStore::new());
/// let purger = spawn_purge(store, Duration::from_secs(300), Purge::default())?;
/// // … serve; at shutdown:
/// purger.shutdown().await;
/// # Ok(()) }
/// ```
pub fn spawn_purge<A>(store: Arc<A>, every: Duration, options: Purge) -> Result<PurgeTask, Error>
where
    A: Admin + ?Sized + 'static,
{
    let runtime = tokio::runtime::Handle::try_current().map_err(|_| {
        Error::InvalidOption("spawn_purge needs a tokio runtime: call it from within one".into())
    })?;
    if every.is_zero() {
        return Err(Error::InvalidOption(
            "spawn_purge: the period must be longer than zero".into(),
        ));
    }
    let (stop, stopped) = watch::channel(false);
    let totals = Arc::new(Mutex::new(Totals::default()));
    let task = runtime.spawn(run(store, every, options, stopped, totals.clone()));
    Ok(PurgeTask {
        stop,
        task: Some(task),
        totals,
    })
}

/// A purge running every period ([`spawn_purge`]); dropping it stops the
/// purge (one in flight is abandoned between two of its statements or
/// within one, which the database then rolls back; a batch is either
/// deleted or not).
///
/// ```
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), idem::Error> {
/// use std::{sync::Arc, time::Duration};
/// let store = Arc::new(idem::MemoryStore::new());
/// let purger = idem::admin::spawn_purge(store, Duration::from_secs(60), Default::default())?;
/// assert_eq!(purger.runs(), 0, "the first purge is one period away");
/// drop(purger);
/// # Ok(()) }
/// ```
#[derive(Debug)]
pub struct PurgeTask {
    stop: watch::Sender<bool>,
    task: Option<JoinHandle<()>>,
    totals: Arc<Mutex<Totals>>,
}

#[derive(Debug, Default)]
struct Totals {
    runs: u64,
    failures: u64,
    purged: Purged,
}

impl PurgeTask {
    /// How many purges have ended, failed ones included.
    pub fn runs(&self) -> u64 {
        self.totals().runs
    }

    /// How many purges failed.
    pub fn failures(&self) -> u64 {
        self.totals().failures
    }

    /// What the purges deleted so far, summed.
    pub fn purged(&self) -> Purged {
        self.totals().purged
    }

    /// Stops the task and waits until it has ended; a purge in flight is
    /// abandoned as on drop.
    pub async fn shutdown(mut self) {
        let _ = self.stop.send(true);
        if let Some(task) = self.task.take() {
            let _ = task.await;
        }
    }

    fn totals(&self) -> std::sync::MutexGuard<'_, Totals> {
        // Totals are plain counters: a panic cannot leave them half-set.
        self.totals
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

impl Drop for PurgeTask {
    fn drop(&mut self) {
        if let Some(task) = self.task.take() {
            task.abort();
        }
    }
}

async fn run<A: Admin + ?Sized>(
    store: Arc<A>,
    every: Duration,
    options: Purge,
    mut stopped: watch::Receiver<bool>,
    totals: Arc<Mutex<Totals>>,
) {
    let mut ticks = tokio::time::interval_at(Instant::now() + every, every);
    ticks.set_missed_tick_behavior(MissedTickBehavior::Delay);
    loop {
        let result = tokio::select! {
            _ = stopped.changed() => return,
            _ = ticks.tick() => tokio::select! {
                _ = stopped.changed() => return,
                result = store.purge_with(&options) => result,
            },
        };
        let mut totals = totals.lock().unwrap_or_else(|p| p.into_inner());
        totals.runs += 1;
        match result {
            Ok(purged) => {
                totals.purged.records += purged.records;
                totals.purged.steps += purged.steps;
                totals.purged.tombstones += purged.tombstones;
                tracing::debug!(?purged, "idem: purged expired records");
            }
            Err(error) => {
                totals.failures += 1;
                tracing::warn!(%error, "idem: purge failed; retrying next period");
            }
        }
    }
}
