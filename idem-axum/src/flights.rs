//! Requests in flight in this process, by record key, for duplicates that
//! [wait](crate::IdempotencyLayer::wait): a duplicate that waited on
//! an attempt that failed (an answer not stored, such as a 5xx, or a
//! panic) gets that attempt's answer instead of running the handler itself.
//! Through the store alone it could not: the failed attempt releases its
//! claim, and the first waiter to poll would win it and run again.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::watch;

use crate::stored::StoredResponse;
use idem_core::fingerprint::Fingerprint;
use idem_core::key::RecordKey;

/// How an attempt ended, as its waiters need to know.
#[derive(Debug, Clone)]
pub(crate) enum Ended {
    /// The key is settled or still claimed: the store has the answer.
    Settled,
    /// The attempt failed and released the key: its answer, if it was
    /// captured.
    Failed(Option<Arc<StoredResponse>>),
}

type Slot = watch::Sender<Option<Ended>>;

/// The attempts running in this process, for one layer.
#[derive(Debug, Default)]
pub(crate) struct Flights(Mutex<HashMap<RecordKey, (Fingerprint, Slot)>>);

/// What a request does on arrival.
pub(crate) enum Joined {
    /// No attempt of this key runs here: this request leads one.
    Lead(Lead),
    /// One runs with the same fingerprint: wait for its end.
    Follow(watch::Receiver<Option<Ended>>),
    /// One runs with another fingerprint: the store answers (422).
    Apart,
}

impl Flights {
    pub(crate) fn join(self: &Arc<Self>, key: RecordKey, fingerprint: Fingerprint) -> Joined {
        let mut flights = self.0.lock().unwrap_or_else(|p| p.into_inner());
        if let Some((running, slot)) = flights.get(&key) {
            return if running.matches(&fingerprint) {
                Joined::Follow(slot.subscribe())
            } else {
                Joined::Apart
            };
        }
        let (slot, _) = watch::channel(None);
        flights.insert(key, (fingerprint, slot));
        Joined::Lead(Lead {
            flights: Arc::clone(self),
            key,
            ended: false,
        })
    }
}

/// The request leading an attempt: tells its followers how it ended.
/// Dropped without [`end`](Lead::end) (a panic), it ends as failed.
pub(crate) struct Lead {
    flights: Arc<Flights>,
    key: RecordKey,
    ended: bool,
}

impl Lead {
    /// Tells the followers and lets later requests lead attempts of their
    /// own.
    pub(crate) fn end(mut self, ended: Ended) {
        self.ended = true;
        self.publish(ended);
    }

    fn publish(&self, ended: Ended) {
        let mut flights = self.flights.0.lock().unwrap_or_else(|p| p.into_inner());
        if let Some((_, slot)) = flights.remove(&self.key) {
            slot.send_replace(Some(ended));
        }
    }
}

impl Drop for Lead {
    fn drop(&mut self) {
        if !self.ended {
            self.publish(Ended::Failed(None));
        }
    }
}

/// Waits up to `wait` for the end of the attempt a duplicate follows.
pub(crate) async fn follow(
    mut end: watch::Receiver<Option<Ended>>,
    wait: Duration,
) -> Option<Ended> {
    let ended = tokio::time::timeout(wait, end.wait_for(Option::is_some)).await;
    match ended {
        Ok(Ok(ended)) => ended.clone(),
        // The attempt's task is gone (the runtime stopped): as failed.
        Ok(Err(_)) => Some(Ended::Failed(None)),
        Err(_) => None,
    }
}
