//! The system under test: idem's public API on a real store, with bodies
//! that count their effects per payload, driven one [`Op`] at a time and
//! judged by the model after each.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::FutureExt;
use idem::admin::Admin;
use idem::fingerprint::Fingerprint;
use idem::key::RecordKey;
use idem::store::{Claim, Retention, Token};
use idem::testing::{FaultyStore, Op as StoreOp};
use idem::{Idempotency, MemoryStore, MySqlStore, PostgresStore, RedisStore, SqliteStore, Store};
use tokio::sync::Notify;
use tokio::task::JoinHandle;
use tokio::time::Instant;

use super::ops::{Dur, End, Fault, Op, Payload, Rec};
use super::reference::{Key, Seen, Span, Times};
use super::tx::SqlTx;
use super::wire::Wire;
use super::{mysql_server, pg_server, redis_server, valkey_server};

/// Which real store a case runs on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Backend {
    /// MemoryStore on tokio's paused clock; a 3 s lease.
    Memory,
    /// SQLite on a temp file, real time; a 400 ms lease.
    Sqlite,
    /// PostgreSQL, a schema of its own per case, real time; 400 ms.
    Postgres,
    /// MySQL/MariaDB, a table of its own per case, real time; 400 ms.
    MySql,
    /// Redis, a key prefix of its own per case, real time; 400 ms. Its
    /// purge has nothing to do (keys expire by `PX`).
    Redis,
    /// Valkey 9 (native compare-and-set: `SET IFEQ`, `DELIFEQ`), as Redis.
    Valkey,
}

impl Backend {
    pub(crate) fn lease(self) -> Duration {
        match self {
            Self::Memory => Duration::from_secs(3),
            _ => Duration::from_millis(400),
        }
    }

    /// The store a case runs on, and its operator's side (purge) where it
    /// has one apart from MemoryStore's sweep.
    /// The case's store (faults injectable), its admin side, its file
    /// (SQLite) and its transactional mode (PostgreSQL, MySQL).
    async fn store(
        self,
        case: u32,
    ) -> (
        FaultyStore,
        Option<Arc<dyn Admin>>,
        Option<PathBuf>,
        Option<SqlTx>,
    ) {
        fn both<S: Admin + Clone + 'static>(store: S) -> (FaultyStore, Option<Arc<dyn Admin>>) {
            (FaultyStore::new(store.clone()), Some(Arc::new(store)))
        }
        let (faulty, admin) = match self {
            // 128 records: two a shard, so a claim on a shard with two
            // sweeps it (`Purge`) without evicting a live record.
            Self::Memory => (FaultyStore::new(MemoryStore::with_max_records(128)), None),
            Self::Sqlite => {
                let file = std::env::temp_dir()
                    .join(format!("idem-model-{}-{case}.db", std::process::id()));
                let store = SqliteStore::open(&file).await.expect("open sqlite");
                let (faulty, admin) = both(store);
                return (faulty, admin, Some(file), None);
            }
            Self::Postgres => {
                let url = pg_server::url().await;
                let store = PostgresStore::builder()
                    .schema(pg_server::unique_schema("model"))
                    .migrated(&url)
                    .await;
                let pool = sqlx::PgPool::connect(&url).await.expect("a pool");
                let (faulty, admin) = both(store.clone());
                return (faulty, admin, None, Some(SqlTx::Pg(store, pool)));
            }
            Self::MySql => {
                let url = mysql_server::url().await;
                let store = MySqlStore::builder()
                    .table(mysql_server::unique_table("model"))
                    .migrated(&url)
                    .await;
                let pool = sqlx::MySqlPool::connect(&url).await.expect("a pool");
                let (faulty, admin) = both(store.clone());
                return (faulty, admin, None, Some(SqlTx::My(store, pool)));
            }
            Self::Redis | Self::Valkey => {
                let url = match self {
                    Self::Redis => redis_server::url().await,
                    _ => valkey_server::url().await,
                };
                both(
                    RedisStore::builder()
                        .prefix(format!("idem-model-{}-{case}:", std::process::id()))
                        .connect(&url)
                        .await
                        .expect("connect to Redis or Valkey"),
                )
            }
        };
        (faulty, admin, None, None)
    }
}

/// A SQL store's builder, connected and migrated.
trait Migrated: Sized {
    type Store;
    async fn migrated(self, url: &str) -> Self::Store;
}

impl Migrated for idem::postgres::PostgresStoreBuilder {
    type Store = PostgresStore;
    async fn migrated(self, url: &str) -> PostgresStore {
        let store = self.connect(url).await.expect("connect to PostgreSQL");
        store.migrate().await.expect("migrate");
        store
    }
}

impl Migrated for idem::mysql::MySqlStoreBuilder {
    type Store = MySqlStore;
    async fn migrated(self, url: &str) -> MySqlStore {
        let store = self.connect(url).await.expect("connect to MySQL");
        store.migrate().await.expect("migrate");
        store
    }
}

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

    /// A call of `p` in a transaction that then commits or rolls back (a
    /// plain call where the store has no transactional mode).
    async fn tx_call(&mut self, p: Payload, commit: bool, lo: Duration) -> Result<(), String> {
        let (rec, dur) = (Rec::Absent, Dur::Normal);
        let Some(sql) = &self.sql else {
            return self.call(p, rec, dur, End::Done, lo).await;
        };
        let times = Times::of(dur, self.lease);
        let call = self
            .idem
            .call("model", self.key.as_str())
            .ttl(times.ttl)
            .lease(times.lease)
            .tombstone(times.tombstone)
            .fingerprint(&format!("{p:?}"));
        let seen = sql.run(call, p, &self.ledger, commit).await;
        if commit {
            return self.judged(p, rec, dur, lo, seen);
        }
        // Rolled back: the key as it was, the effect undone.
        self.model.judge(p, rec, dur, self.span(lo), &seen)?;
        if let Seen::Ran(value) = &seen {
            let mut ledger = self.ledger.lock().unwrap();
            *ledger.permits.entry(p).or_default() += 1;
            ledger.check(p, &seen)?;
            ledger.produced.entry(p).or_default().retain(|v| v != value);
        }
        Ok(())
    }

    /// A state update of `p`, run to its end.
    async fn rerun(&mut self, p: Payload, lo: Duration) -> Result<(), String> {
        let gates = Gates::open();
        let (task, _) = self.spawn_call(p, Rec::Absent, Dur::Normal, End::Done, &gates, true);
        let seen = joined(task.await);
        let now = self.span(lo);
        self.model.judge_rerun(p, now, &seen)?;
        if matches!(seen, Seen::Ran(_)) {
            *self.ledger.lock().unwrap().permits.entry(p).or_default() += 1;
        }
        self.settled(p, &seen);
        self.ledger.lock().unwrap().check(p, &seen)?;
        let times = Times::of(Dur::Normal, self.lease);
        self.model.after_call(p, times, now, &seen);
        Ok(())
    }

    /// A call of `p` that meets `fault`, where the model knows whether
    /// its claim wins (else nothing is done): a fault of a step the call
    /// does not reach (a completion after a replay) is disarmed unspent.
    async fn faulty_call(&mut self, p: Payload, fault: Fault, lo: Duration) -> Result<(), String> {
        // A margin for the time the call takes, on real time.
        let ahead = Span {
            lo: self.now(),
            hi: self.now() + self.lease / 4,
        };
        let Some(wins) = self.model.wins(p, ahead) else {
            return Ok(());
        };
        let (op, lost) = match fault {
            Fault::ClaimFails => (StoreOp::Claim, false),
            Fault::ClaimLost => (StoreOp::Claim, true),
            Fault::CompleteFails => (StoreOp::Complete, false),
            Fault::CompleteLost => (StoreOp::Complete, true),
        };
        self.arm(op, lost, 1);
        let (task, entered) = self.spawn(p, Rec::Absent, Dur::Normal, End::Done, &Gates::open());
        let seen = joined(task.await);
        self.arm(op, lost, 0);
        let reaches = op == StoreOp::Claim || wins;
        if !reaches {
            return self.judged(p, Rec::Absent, Dur::Normal, lo, seen);
        }
        let Seen::Failed(_) = &seen else {
            return Err(format!(
                "{p:?} met {fault:?} and saw {seen:?}, not the store's error"
            ));
        };
        let now = self.span(lo);
        let times = Times::of(Dur::Normal, self.lease);
        let ran = entered.load(Ordering::SeqCst);
        if ran != (op == StoreOp::Complete) {
            return Err(format!("{p:?} met {fault:?}: the body ran: {ran}"));
        }
        let value = ran.then(|| self.ran_unanswered(p));
        match fault {
            Fault::ClaimFails => {}
            Fault::ClaimLost if wins => self.model.unsettled(p, None, times, now),
            Fault::ClaimLost => {}
            Fault::CompleteFails => self.model.unsettled(p, value, times, now),
            Fault::CompleteLost => {
                let value = value.expect("the body ran");
                self.ledger.lock().unwrap().unanswered.remove(&p);
                self.model.done(p, &value, times, now);
            }
        }
        self.ledger
            .lock()
            .unwrap()
            .check(p, &Seen::Failed(String::new()))
    }

    /// The body of `p` ran and its answer never reached the caller: one
    /// more permitted effect, which a truthful reconcile finds.
    fn ran_unanswered(&self, p: Payload) -> String {
        let mut ledger = self.ledger.lock().unwrap();
        *ledger.permits.entry(p).or_default() += 1;
        let value = ledger.produced[&p]
            .last()
            .cloned()
            .expect("the body's effect");
        ledger.unanswered.insert(p, value.clone());
        value
    }

    /// Arms (`n` = 1) or disarms (0) a failure or lost answer of `op`.
    fn arm(&self, op: StoreOp, lost: bool, n: u32) {
        if lost {
            self.faulty.lose_answer_next(op, n);
        } else {
            self.faulty.fail_next(op, n);
        }
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

/// The gates a body passes: entered, then (effect gate) its effect, then
/// (return gate) its return. An open set never waits.
#[derive(Clone)]
struct Gates {
    entered: Arc<Notify>,
    effect: Arc<Notify>,
    effected: Arc<Notify>,
    ret: Arc<Notify>,
    open: bool,
}

impl Gates {
    fn open() -> Self {
        Self {
            open: true,
            ..Self::closed()
        }
    }

    fn closed() -> Self {
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
struct CallSpec {
    idem: Idempotency,
    key: String,
    times: Times,
    ledger: Arc<Mutex<Ledger>>,
    entered: Arc<AtomicBool>,
    gates: Gates,
    /// A state update: `mismatch = "rerun"`.
    rerun: bool,
}

impl CallSpec {
    /// Runs the call and classifies its answer; a panic is caught.
    async fn run(self, p: Payload, rec: Rec, end: End) -> Seen {
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

fn joined(out: Result<Seen, tokio::task::JoinError>) -> Seen {
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
