//! One call of a case, on a task of its own: its body (with the gates a
//! holder waits at), its reconcile, and how its answer is classified.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use futures::FutureExt;
use idem::Idempotency;
use tokio::sync::Notify;

use super::super::ops::{End, Payload, Rec};
use super::super::reference::{Seen, Times};
use super::{Fail, Ledger};

/// The gates a body passes: entered, then (effect gate) its effect, then
/// (return gate) its return. An open set never waits.
#[derive(Clone)]
pub(super) struct Gates {
    pub(super) entered: Arc<Notify>,
    pub(super) effect: Arc<Notify>,
    pub(super) effected: Arc<Notify>,
    pub(super) ret: Arc<Notify>,
    pub(super) open: bool,
}

impl Gates {
    pub(super) fn open() -> Self {
        Self {
            open: true,
            ..Self::closed()
        }
    }

    pub(super) fn closed() -> Self {
        Self {
            entered: Arc::default(),
            effect: Arc::default(),
            effected: Arc::default(),
            ret: Arc::default(),
            open: false,
        }
    }
}

/// One call's parts, moved into its task.
pub(super) struct CallSpec {
    pub(super) idem: Idempotency,
    pub(super) key: String,
    pub(super) times: Times,
    pub(super) ledger: Arc<Mutex<Ledger>>,
    pub(super) entered: Arc<AtomicBool>,
    pub(super) gates: Gates,
    /// A state update: `mismatch = "rerun"`.
    pub(super) rerun: bool,
}

impl CallSpec {
    /// Runs the call and classifies its answer; a panic is caught.
    pub(super) async fn run(self, p: Payload, rec: Rec, end: End) -> Seen {
        let reconciled = Arc::new(AtomicBool::new(false));
        let entered = self.entered.clone();
        let answer = std::panic::AssertUnwindSafe(self.call(p, rec, end, reconciled.clone()))
            .catch_unwind()
            .await;
        match answer {
            Err(panic) => Seen::Panicked(panic_text(&*panic)),
            Ok(out) => classify(
                out,
                entered.load(Ordering::SeqCst),
                reconciled.load(Ordering::SeqCst),
            ),
        }
    }

    async fn call(
        self,
        p: Payload,
        rec: Rec,
        end: End,
        reconciled: Arc<AtomicBool>,
    ) -> Result<String, Fail> {
        let Times {
            lease,
            ttl,
            tombstone,
        } = self.times;
        let mut call = self
            .idem
            .call("model", self.key.as_str())
            .ttl(ttl)
            .lease(lease)
            .fingerprint(&format!("{p:?}"));
        if !tombstone.is_zero() {
            call = call.tombstone(tombstone);
        }
        if self.rerun {
            call = call.mismatch(idem::Mismatch::Rerun);
        }
        let (ledger, entered, gates) = (self.ledger.clone(), self.entered, self.gates);
        let body = move || body(p, end, ledger, entered, gates);
        let ledger = self.ledger;
        match rec {
            Rec::Absent => call.run(body).await,
            Rec::Truthful | Rec::Fails => {
                call.reconcile(move || reconcile(p, rec, ledger, reconciled))
                    .run(body)
                    .await
            }
        }
    }
}

/// The body: entered, (gate) its effect, (gate) its return.
async fn body(
    p: Payload,
    end: End,
    ledger: Arc<Mutex<Ledger>>,
    entered: Arc<AtomicBool>,
    gates: Gates,
) -> Result<String, Fail> {
    entered.store(true, Ordering::SeqCst);
    gates.entered.notify_one();
    if end == End::ErrFirst {
        return Err(Fail::Declined);
    }
    if !gates.open {
        gates.effect.notified().await;
    }
    let value = ledger.lock().unwrap().effect(p);
    gates.effected.notify_one();
    if !gates.open {
        gates.ret.notified().await;
    }
    Ok(value)
}

/// The reconcile: found when a holder of `p` had its effect and never
/// answered; `Rec::Fails` errs.
async fn reconcile(
    p: Payload,
    rec: Rec,
    ledger: Arc<Mutex<Ledger>>,
    reconciled: Arc<AtomicBool>,
) -> Result<Option<String>, Fail> {
    if rec == Rec::Fails {
        return Err(Fail::Lookup);
    }
    let found = ledger.lock().unwrap().unanswered.get(&p).cloned();
    reconciled.store(found.is_some(), Ordering::SeqCst);
    Ok(found)
}

pub(crate) fn classify(out: Result<String, Fail>, entered: bool, reconciled: bool) -> Seen {
    match out {
        Ok(value) if entered => Seen::Ran(value),
        Ok(value) if reconciled => Seen::Reconciled(value),
        Ok(value) => Seen::Replayed(value),
        Err(Fail::Declined) => Seen::Declined,
        Err(Fail::Lookup) => Seen::LookupFailed,
        Err(Fail::Idem(err)) => match err {
            idem::Error::InProgress { .. } => Seen::InProgress,
            idem::Error::FingerprintMismatch { .. } => Seen::Mismatch,
            idem::Error::Expired { .. } => Seen::Expired,
            idem::Error::LeaseLost { .. } => Seen::LeaseLost,
            idem::Error::InvalidOption(_) => Seen::Invalid,
            other => Seen::Failed(other.to_string()),
        },
    }
}

pub(super) fn joined(out: Result<Seen, tokio::task::JoinError>) -> Seen {
    match out {
        Ok(seen) => seen,
        Err(err) if err.is_panic() => Seen::Panicked(panic_text(&*err.into_panic())),
        Err(err) => Seen::Failed(format!("task: {err}")),
    }
}

fn panic_text(panic: &(dyn std::any::Any + Send)) -> String {
    panic
        .downcast_ref::<&str>()
        .map(|s| (*s).to_owned())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "a panic".into())
}
