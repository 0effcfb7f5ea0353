//! The system under test: idem's public API on a real store, with bodies
//! that count their effects per payload, driven one [`Op`] at a time and
//! judged by the model after each.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use idem::admin::Admin;
use idem::fingerprint::Fingerprint;
use idem::key::RecordKey;
use idem::store::{Claim, Retention, Token};
use idem::testing::{FaultyStore, Op as StoreOp};
use idem::{Idempotency, Store};
use tokio::sync::Notify;
use tokio::task::JoinHandle;
use tokio::time::Instant;

use super::ops::{Dur, End, Op, Payload, Rec};
use super::reference::{Key, Seen, Span, Times};
use super::tx::SqlTx;

mod backend;
mod calls;
mod variants;

use super::wire::Wire;
pub(crate) use backend::Backend;
pub(crate) use calls::classify;
use calls::{CallSpec, Gates, joined};

/// The body's error: its own released `Err`, the reconcile's, or idem's.
#[derive(Debug)]
pub(crate) enum Fail {
    Declined,
    Lookup,
    Idem(idem::Error),
}

impl From<idem::Error> for Fail {
    fn from(err: idem::Error) -> Self {
        Self::Idem(err)
    }
}

/// Every effect a body had, per payload, and the effects of holders that
/// never answered (what a truthful reconcile finds).
#[derive(Default, Debug)]
pub(crate) struct Ledger {
    pub(crate) produced: HashMap<Payload, Vec<String>>,
    pub(crate) unanswered: HashMap<Payload, String>,
    pub(crate) permits: HashMap<Payload, u32>,
    runs: u32,
}

impl Ledger {
    /// The body of `p` has its effect: a new value.
    pub(crate) fn effect(&mut self, p: Payload) -> String {
        self.runs += 1;
        let value = format!("{p:?}-{}", self.runs);
        self.produced.entry(p).or_default().push(value.clone());
        value
    }

    /// Effects ≤ permits per payload; every answered value was produced
    /// for its payload.
    pub(crate) fn check(&self, p: Payload, seen: &Seen) -> Result<(), String> {
        for (q, values) in &self.produced {
            let permits = self.permits.get(q).copied().unwrap_or(0);
            if values.len() > permits as usize {
                return Err(format!(
                    "{q:?} had {} effects, {permits} allowed",
                    values.len()
                ));
            }
        }
        let value = match seen {
            Seen::Ran(v) | Seen::Replayed(v) | Seen::Reconciled(v) => v,
            _ => return Ok(()),
        };
        let mine = self.produced.get(&p).is_some_and(|vs| vs.contains(value));
        if mine {
            Ok(())
        } else {
            Err(format!(
                "{p:?} was answered {value:?}, which no body of {p:?} produced"
            ))
        }
    }
}

/// A holder in flight: its body waits at two gates.
struct Holder {
    p: Payload,
    times: Times,
    task: JoinHandle<Seen>,
    effect_gate: Arc<Notify>,
    return_gate: Arc<Notify>,
    effected: Arc<Notify>,
    entered: Arc<AtomicBool>,
    forgotten: bool,
}

/// A case: the handle, the store's parts, the model and the ledger.
pub(crate) struct Sut {
    idem: Idempotency,
    wire: Wire,
    faulty: FaultyStore,
    admin: Option<Arc<dyn Admin>>,
    file: Option<PathBuf>,
    /// The transactional mode, on the SQL stores.
    sql: Option<SqlTx>,
    key: String,
    model: Key,
    ledger: Arc<Mutex<Ledger>>,
    holder: Option<Holder>,
    start: Instant,
    lease: Duration,
}

static CASES: AtomicU32 = AtomicU32::new(0);

impl Sut {
    pub(crate) async fn new(backend: Backend) -> Self {
        let case = CASES.fetch_add(1, Ordering::SeqCst);
        let (faulty, admin, file, sql) = backend.store(case).await;
        let wire = Wire::new(faulty.clone());
        let lease = backend.lease();
        Self {
            idem: Idempotency::new(wire.clone()),
            wire,
            faulty,
            admin,
            file,
            sql,
            key: format!("order-{case}"),
            model: Key::new(lease),
            ledger: Arc::default(),
            holder: None,
            start: Instant::now(),
            lease,
        }
    }

    fn now(&self) -> Duration {
        self.start.elapsed()
    }

    /// Applies `op` and judges what was seen.
    pub(crate) async fn apply(&mut self, op: Op) -> Result<(), String> {
        let lo = self.now();
        match op {
            Op::Call { p, rec, dur, end } => self.call(p, rec, dur, end, lo).await,
            Op::Faulty { p, fault } => self.faulty_call(p, fault, lo).await,
            Op::Rerun { p } => self.rerun(p, lo).await,
            Op::TxCall { p, commit } => self.tx_call(p, commit, lo).await,
            Op::Start { p, rec, late } => self.start_holder(p, rec, late, lo).await,
            Op::Finish => self.finish(lo).await,
            Op::Drop => self.drop_holder(lo).await,
            Op::Vanish { effect } => self.vanish(effect, lo).await,
            Op::Advance { quarters } => {
                tokio::time::sleep(self.lease / 4 * u32::from(quarters)).await;
                Ok(())
            }
            Op::Forget => self.forget().await,
            Op::Purge => self.purge().await,
        }
    }

    /// The span from `lo` to now.
    fn span(&self, lo: Duration) -> Span {
        Span { lo, hi: self.now() }
    }

    async fn call(
        &mut self,
        p: Payload,
        rec: Rec,
        dur: Dur,
        end: End,
        lo: Duration,
    ) -> Result<(), String> {
        let gates = Gates::open();
        let (task, _) = self.spawn(p, rec, dur, end, &gates);
        let seen = joined(task.await);
        self.judged(p, rec, dur, lo, seen)
    }

    /// Judges a call's answer, then moves the model.
    fn judged(
        &mut self,
        p: Payload,
        rec: Rec,
        dur: Dur,
        lo: Duration,
        seen: Seen,
    ) -> Result<(), String> {
        let now = self.span(lo);
        self.model.judge(p, rec, dur, now, &seen)?;
        if matches!(seen, Seen::Ran(_) | Seen::Entered | Seen::Declined) {
            *self.ledger.lock().unwrap().permits.entry(p).or_default() += 1;
        }
        self.settled(p, &seen);
        self.ledger.lock().unwrap().check(p, &seen)?;
        self.model
            .after_call(p, Times::of(dur, self.lease), now, &seen);
        Ok(())
    }

    /// A payload answered with a value has no unanswered effect left.
    fn settled(&self, p: Payload, seen: &Seen) {
        if matches!(seen, Seen::Ran(_) | Seen::Reconciled(_)) {
            self.ledger.lock().unwrap().unanswered.remove(&p);
        }
    }

    /// Spawns a call of `p`; its body passes `gates`. Also returns
    /// whether the body was entered.
    fn spawn(
        &self,
        p: Payload,
        rec: Rec,
        dur: Dur,
        end: End,
        gates: &Gates,
    ) -> (JoinHandle<Seen>, Arc<AtomicBool>) {
        self.spawn_call(p, rec, dur, end, gates, false)
    }

    /// As [`spawn`](Self::spawn); `rerun`: a state update.
    fn spawn_call(
        &self,
        p: Payload,
        rec: Rec,
        dur: Dur,
        end: End,
        gates: &Gates,
        rerun: bool,
    ) -> (JoinHandle<Seen>, Arc<AtomicBool>) {
        let entered = Arc::new(AtomicBool::new(false));
        let call = CallSpec {
            idem: self.idem.clone(),
            key: self.key.clone(),
            times: Times::of(dur, self.lease),
            ledger: self.ledger.clone(),
            entered: entered.clone(),
            gates: gates.clone(),
            rerun,
        };
        (tokio::spawn(call.run(p, rec, end)), entered)
    }

    async fn start_holder(
        &mut self,
        p: Payload,
        rec: Rec,
        late: bool,
        lo: Duration,
    ) -> Result<(), String> {
        if late {
            self.wire.late_next_claim(self.lease.mul_f64(0.85));
        }
        let gates = Gates::closed();
        let (mut task, entered) = self.spawn(p, rec, Dur::Normal, End::Done, &gates);
        let seen = tokio::select! {
            () = gates.entered.notified() => Seen::Entered,
            out = &mut task => joined(out),
        };
        if late && seen == Seen::LeaseLost && self.now() >= lo + self.lease {
            let times = Times::of(Dur::Normal, self.lease);
            self.model.won_too_late(p, times, self.span(lo));
            return Ok(());
        }
        self.judged(p, rec, Dur::Normal, lo, seen.clone())?;
        if seen == Seen::Entered {
            self.holder = Some(Holder {
                p,
                times: Times::of(Dur::Normal, self.lease),
                task,
                effect_gate: gates.effect,
                return_gate: gates.ret,
                effected: gates.effected,
                entered,
                forgotten: false,
            });
        }
        Ok(())
    }

    /// The holder has its effect and returns: it must complete, unless
    /// its key was forgotten meanwhile.
    async fn finish(&mut self, lo: Duration) -> Result<(), String> {
        let Some(holder) = self.holder.take() else {
            return Ok(());
        };
        holder.effect_gate.notify_one();
        holder.return_gate.notify_one();
        let seen = joined(holder.task.await);
        let now = self.span(lo);
        self.ledger.lock().unwrap().check(holder.p, &seen)?;
        match (&seen, holder.forgotten) {
            (Seen::Ran(value), _) => {
                self.settled(holder.p, &seen);
                self.model.done(holder.p, value, holder.times, now);
                Ok(())
            }
            (Seen::LeaseLost, true) => Ok(()),
            _ => Err(format!(
                "the live holder of {:?} ended {seen:?}, not with its value",
                holder.p
            )),
        }
    }

    /// The holder's future is dropped before its effect: the claim is
    /// released.
    async fn drop_holder(&mut self, _lo: Duration) -> Result<(), String> {
        let Some(holder) = self.holder.take() else {
            return Ok(());
        };
        let seen = self.wire.releases();
        holder.task.abort();
        let _ = holder.task.await;
        if !holder.forgotten && holder.entered.load(Ordering::SeqCst) {
            self.wire.released_after(seen).await;
            self.model.slot = super::reference::Slot::Free;
        }
        Ok(())
    }

    /// The holder's process vanishes (after its effect, if `effect`): its
    /// release fails, the claim stays until its lease lapses.
    async fn vanish(&mut self, effect: bool, lo: Duration) -> Result<(), String> {
        let Some(holder) = self.holder.take() else {
            return Ok(());
        };
        let mut value = None;
        if effect {
            holder.effect_gate.notify_one();
            holder.effected.notified().await;
            let produced = self.ledger.lock().unwrap().produced[&holder.p]
                .last()
                .cloned();
            value = produced;
        }
        let seen = self.wire.releases();
        self.faulty.fail_next(StoreOp::Release, 1);
        holder.task.abort();
        let _ = holder.task.await;
        self.wire.released_after(seen).await;
        self.faulty.fail_next(StoreOp::Release, 0);
        if holder.forgotten {
            return Ok(());
        }
        if let Some(value) = &value {
            self.ledger
                .lock()
                .unwrap()
                .unanswered
                .insert(holder.p, value.clone());
        }
        let now = self.span(lo);
        self.model.vanished(value, now);
        Ok(())
    }

    async fn forget(&mut self) -> Result<(), String> {
        self.idem
            .forget("model", self.key.as_str())
            .await
            .map_err(|err| format!("forget failed: {err}"))?;
        self.model.slot = super::reference::Slot::Free;
        self.ledger.lock().unwrap().unanswered.clear();
        if let Some(holder) = &mut self.holder {
            holder.forgotten = true;
        }
        Ok(())
    }

    /// The store's cleanup: its `purge` (`idem purge`), or MemoryStore's
    /// sweep, which a claim on a full shard runs.
    async fn purge(&mut self) -> Result<(), String> {
        match &self.admin {
            Some(store) => {
                store
                    .purge()
                    .await
                    .map_err(|err| format!("purge failed: {err}"))?;
            }
            None => self.sweep_memory().await,
        }
        Ok(())
    }

    /// Fills every shard with an expired record, then claims a key in
    /// each: a claim on a shard at its limit (two) sweeps it first.
    async fn sweep_memory(&self) {
        const FILLERS: u32 = 600;
        let store: &dyn Store = &self.faulty;
        for i in 0..FILLERS {
            let key = RecordKey::new("model-filler", &i);
            let claim = Claim::new(Token::random(), Fingerprint::NONE, self.lease, "filler");
            if store.claim(&key, &claim).await.is_ok() {
                let kept = Retention::new(Duration::from_millis(1));
                let _ = store.complete(&key, claim.token, b"{}", kept).await;
            }
        }
        tokio::time::sleep(Duration::from_millis(2)).await;
        for i in 0..FILLERS {
            let key = RecordKey::new("model-sweeper", &i);
            let claim = Claim::new(Token::random(), Fingerprint::NONE, self.lease, "filler");
            let _ = store.claim(&key, &claim).await;
            let _ = store.forget(&key).await;
        }
    }

    /// Ends the case: a holder still in flight finishes, the file goes.
    pub(crate) async fn close(mut self) {
        if let Some(holder) = self.holder.take() {
            holder.task.abort();
            let _ = holder.task.await;
        }
        if let Some(file) = &self.file {
            for suffix in ["", "-wal", "-shm"] {
                let _ = std::fs::remove_file(format!("{}{suffix}", file.display()));
            }
        }
    }
}

/// Runs `ops` on a fresh case of `backend`: `Err` names the first step
/// whose outcome the model does not allow. `applied` counts the steps run
/// (the failing one included), so shrinking drops only the later ones.
pub(crate) async fn run(backend: Backend, ops: &[Op], applied: &AtomicUsize) -> Result<(), String> {
    let mut sut = Sut::new(backend).await;
    let mut verdict = Ok(());
    for (i, op) in ops.iter().enumerate() {
        applied.store(i + 1, Ordering::SeqCst);
        if let Err(why) = sut.apply(*op).await {
            verdict = Err(format!("step {i} ({op:?}): {why}"));
            break;
        }
    }
    sut.close().await;
    verdict
}
