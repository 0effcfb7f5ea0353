//! An order workflow with recovery points: reserve stock, charge the card,
//! ship, each an `idem::step`, on a SQLite file.
//!
//! `cargo run -p idem-integration --example order_steps` runs one order
//! whose carrier is down on the first attempt: the retry replays the
//! reservation and the charge and only ships.
//!
//! `cargo run -p idem-integration --example order_steps -- chaos 300 6`
//! is the chaos test (also run by `tests/all/steps_chaos.rs`): a worker
//! process works through 300 orders and is killed with SIGKILL 6 times at
//! random moments (mid-step or between steps), then restarted; at the end
//! every finished step's effect must have happened exactly once, and a
//! step in flight at a kill once more per such kill (never twice in one
//! worker), with the same child key every time.
//!
//! The effects (the warehouse's reservation, the provider's charge, the
//! carrier's label) are rows in a second SQLite file, keyed by order, step
//! and the child key the step sent, as the downstream services would
//! record them.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use idem::{Error, Idempotency, SqliteStore, StoreError, idempotent};
use serde::{Deserialize, Serialize};
use sqlx::Row;
use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePool, SqliteSynchronous};

/// What a shipped order returns (and what a duplicate replays).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct Shipped {
    pub order: u32,
    pub reservation: String,
    pub charge: String,
    pub tracking: String,
}

/// The downstream services' side of things: every effect they performed.
pub(crate) struct Effects {
    pool: SqlitePool,
    /// Which worker process (0, 1, … after each kill) performs effects.
    worker: u32,
    /// How long a downstream call takes after its effect: a kill then
    /// leaves the effect done and the step unfinished.
    pause: Duration,
    /// Whether the carrier answers (the demo's first attempt: no).
    carrier_up: bool,
}

fn store_error(err: sqlx::Error) -> Error {
    Error::Store(StoreError::new("effects", err))
}

impl Effects {
    pub(crate) async fn open(path: &Path, worker: u32, pause: Duration) -> Result<Self, Error> {
        let options = SqliteConnectOptions::new()
            .filename(path)
            .create_if_missing(true)
            .journal_mode(SqliteJournalMode::Wal)
            .synchronous(SqliteSynchronous::Full)
            .busy_timeout(Duration::from_secs(10));
        let pool = SqlitePool::connect_with(options)
            .await
            .map_err(store_error)?;
        sqlx::raw_sql(
            "CREATE TABLE IF NOT EXISTS effects (order_id INTEGER NOT NULL, step TEXT NOT NULL, child_key TEXT NOT NULL, worker INTEGER NOT NULL);
             CREATE TABLE IF NOT EXISTS finished (order_id INTEGER NOT NULL, step TEXT NOT NULL, worker INTEGER NOT NULL);",
        )
        .execute(&pool)
        .await
        .map_err(store_error)?;
        Ok(Effects {
            pool,
            worker,
            pause,
            carrier_up: true,
        })
    }

    /// A downstream call: the effect happens (a row), then the answer
    /// takes `pause` to come back.
    async fn call(&self, order: u32, step: &str) -> Result<String, Error> {
        if step == "ship" && !self.carrier_up {
            return Err(Error::Store(StoreError::new(
                "carrier",
                "carrier unavailable",
            )));
        }
        // The key the downstream service dedupes on: the same on every
        // retry of this step.
        let key = idem::child_key(step).expect("inside an idempotent call");
        sqlx::query(
            "INSERT INTO effects (order_id, step, child_key, worker) VALUES (?1, ?2, ?3, ?4)",
        )
        .bind(order)
        .bind(step)
        .bind(&key)
        .bind(self.worker)
        .execute(&self.pool)
        .await
        .map_err(store_error)?;
        tokio::time::sleep(self.pause).await;
        Ok(format!("{step}-{}", &key[..12]))
    }

    /// Notes that `step` returned in this worker (replayed or run), to
    /// check afterwards that no step ran again after it had finished.
    async fn finished(&self, order: u32, step: &str) -> Result<(), Error> {
        sqlx::query("INSERT INTO finished (order_id, step, worker) VALUES (?1, ?2, ?3)")
            .bind(order)
            .bind(step)
            .bind(self.worker)
            .execute(&self.pool)
            .await
            .map_err(store_error)?;
        Ok(())
    }
}

/// One order: reserve → charge → ship, each a recovery point. A short
/// lease, so a killed worker's claims are taken over soon; a retry waits
/// for them.
#[idempotent(store = idem, key = order, scope = "orders", lease = "500ms", wait = "10s", skip(idem, effects))]
pub(crate) async fn process(
    idem: &Idempotency,
    effects: &Effects,
    order: u32,
) -> Result<Shipped, Error> {
    let reservation = idem::step("reserve", || effects.call(order, "reserve")).await?;
    effects.finished(order, "reserve").await?;
    let charge = idem::step("charge", || effects.call(order, "charge")).await?;
    effects.finished(order, "charge").await?;
    let tracking = idem::step("ship", || effects.call(order, "ship")).await?;
    effects.finished(order, "ship").await?;
    Ok(Shipped {
        order,
        reservation,
        charge,
        tracking,
    })
}

/// The worker: processes orders `0..orders`, four at a time.
pub(crate) async fn work(dir: &Path, worker: u32, orders: u32) -> Result<(), Error> {
    use futures::StreamExt;
    let idem = Idempotency::new(SqliteStore::open(dir.join("idem.db")).await?);
    let effects = Effects::open(&dir.join("effects.db"), worker, Duration::from_millis(4)).await?;
    let mut done = futures::stream::iter(0..orders)
        .map(|order| process(&idem, &effects, order))
        .buffer_unordered(4);
    while let Some(shipped) = done.next().await {
        shipped?;
    }
    Ok(())
}

/// Environment variable that makes a process a chaos worker:
/// `<dir>|<worker>|<orders>`.
pub(crate) const WORKER_ENV: &str = "IDEM_ORDER_STEPS_WORKER";

/// Runs as a chaos worker if `WORKER_ENV` says so; `false` otherwise.
pub(crate) async fn worker_from_env() -> bool {
    let Ok(spec) = std::env::var(WORKER_ENV) else {
        return false;
    };
    let mut parts = spec.rsplitn(3, '|');
    let orders: u32 = parts.next().and_then(|n| n.parse().ok()).expect("orders");
    let worker: u32 = parts.next().and_then(|n| n.parse().ok()).expect("worker");
    let dir = PathBuf::from(parts.next().expect("dir"));
    work(&dir, worker, orders).await.expect("worker failed");
    true
}

/// What the chaos run found.
#[derive(Debug, Default)]
pub(crate) struct ChaosReport {
    pub orders: u32,
    pub kills: u32,
    /// Kills after which some step ran again (it was in flight).
    pub kills_mid_step: u32,
    pub steps: usize,
    pub steps_run_once: usize,
    /// Steps in flight at one kill: run twice.
    pub steps_run_twice: usize,
    /// Steps in flight at two kills or more (each in another worker): run
    /// once more per kill.
    pub steps_run_more: usize,
    /// All effects performed.
    pub effects: usize,
    /// Orders cut by a kill between two steps (finished steps in one
    /// worker, the rest in another, none run twice).
    pub orders_resumed_between_steps: usize,
    /// Orders cut by a kill in the middle of a step (that step ran again).
    pub orders_resumed_mid_step: usize,
    pub elapsed: Duration,
}

/// A small pseudo-random source: kill times need no more.
fn jitter(seed: &mut u64, range: std::ops::Range<u64>) -> u64 {
    *seed ^= *seed << 13;
    *seed ^= *seed >> 7;
    *seed ^= *seed << 17;
    range.start + *seed % (range.end - range.start)
}

/// Runs the chaos test in `dir`: `kills` workers killed with SIGKILL at
/// random moments, then one that finishes. `spawn` makes the command of a
/// worker process given its `WORKER_ENV` value.
pub(crate) async fn chaos(
    dir: &Path,
    orders: u32,
    kills: u32,
    spawn: impl Fn(String) -> Command,
) -> Result<ChaosReport, String> {
    let started = Instant::now();
    let mut seed = u64::from(std::process::id()) | 1 << 40;
    let effects = Effects::open(&dir.join("effects.db"), 0, Duration::ZERO)
        .await
        .map_err(|err| err.to_string())?;
    for worker in 0..=kills {
        let mut child = spawn(format!("{}|{worker}|{orders}", dir.display()))
            .spawn()
            .map_err(|err| err.to_string())?;
        if worker == kills {
            let status = child.wait().map_err(|err| err.to_string())?;
            if !status.success() {
                return Err(format!("the last worker failed: {status}"));
            }
            break;
        }
        // Kill once the worker has performed a random number of effects
        // (so whatever the machine's speed, the kill lands in the middle
        // of the work), plus a few milliseconds: mid-step or between steps.
        let target = effect_count(&effects).await? + jitter(&mut seed, 20..120);
        let deadline = Instant::now() + Duration::from_secs(60);
        while effect_count(&effects).await? < target {
            if Instant::now() > deadline
                || child.try_wait().map_err(|err| err.to_string())?.is_some()
            {
                return Err(format!("worker {worker} ended or stalled before its kill"));
            }
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        tokio::time::sleep(Duration::from_millis(jitter(&mut seed, 0..8))).await;
        child.kill().map_err(|err| err.to_string())?; // SIGKILL
        child.wait().map_err(|err| err.to_string())?;
    }
    let mut report = check(dir, orders, kills).await?;
    report.elapsed = started.elapsed();
    Ok(report)
}

async fn effect_count(effects: &Effects) -> Result<u64, String> {
    let n: i64 = sqlx::query_scalar("SELECT count(*) FROM effects")
        .fetch_one(&effects.pool)
        .await
        .map_err(|err| err.to_string())?;
    Ok(n as u64)
}

/// Each step's runs: (order, step) -> [(child key, worker)].
type Runs = HashMap<(u32, String), Vec<(String, u32)>>;

fn text(err: impl std::fmt::Display) -> String {
    err.to_string()
}

/// Checks the effects against the rules and replays every order.
async fn check(dir: &Path, orders: u32, kills: u32) -> Result<ChaosReport, String> {
    let effects = Effects::open(&dir.join("effects.db"), kills + 1, Duration::ZERO)
        .await
        .map_err(text)?;
    let rows = sqlx::query("SELECT order_id, step, child_key, worker FROM effects")
        .fetch_all(&effects.pool)
        .await
        .map_err(text)?;
    let mut runs = Runs::new();
    for row in rows {
        let (order, step): (u32, String) = (row.get(0), row.get(1));
        runs.entry((order, step))
            .or_default()
            .push((row.get(2), row.get(3)));
    }
    let finished = sqlx::query("SELECT order_id, step, min(worker) FROM finished GROUP BY 1, 2")
        .fetch_all(&effects.pool)
        .await
        .map_err(text)?;
    let first_finished: HashMap<(u32, String), u32> = finished
        .into_iter()
        .map(|row| ((row.get(0), row.get(1)), row.get(2)))
        .collect();
    let mut report = ChaosReport {
        orders,
        kills,
        steps: runs.len(),
        ..ChaosReport::default()
    };
    check_steps(&runs, &first_finished, &mut report)?;
    if report.steps != orders as usize * 3 {
        return Err(format!(
            "{} steps ran, expected {}",
            report.steps,
            orders * 3
        ));
    }
    count_resumed(&runs, &mut report);
    replay_all(dir, &effects, &runs, &report).await?;
    Ok(report)
}

/// The rules, step by step: a step runs again only in a new worker (once
/// per kill it was in flight at, never twice in one process), always with
/// the same child key, and never after it finished.
fn check_steps(
    runs: &Runs,
    first_finished: &HashMap<(u32, String), u32>,
    report: &mut ChaosReport,
) -> Result<(), String> {
    let mut mid_step = std::collections::BTreeSet::new();
    for ((order, step), ran) in runs {
        match ran.len() {
            1 => report.steps_run_once += 1,
            2 => report.steps_run_twice += 1,
            _ => report.steps_run_more += 1,
        }
        report.effects += ran.len();
        let workers: std::collections::BTreeSet<u32> = ran.iter().map(|(_, w)| *w).collect();
        if workers.len() != ran.len() {
            return Err(format!("order {order} step {step} ran twice in one worker"));
        }
        if ran.iter().any(|(key, _)| *key != ran[0].0) {
            return Err(format!(
                "order {order} step {step} got different child keys"
            ));
        }
        let last = workers.last().copied().unwrap_or(0);
        if let Some(&done) = first_finished.get(&(*order, step.clone()))
            && done < last
        {
            return Err(format!(
                "order {order} step {step} ran again after it finished"
            ));
        }
        // Every worker but the last to run it was killed while it ran.
        mid_step.extend(workers.into_iter().filter(|w| *w != last));
    }
    report.kills_mid_step = mid_step.len() as u32;
    if report.kills_mid_step > report.kills {
        return Err(format!(
            "{} workers were cut mid-step, but only {} were killed",
            report.kills_mid_step, report.kills
        ));
    }
    Ok(())
}

/// Orders a kill cut between two steps, and in the middle of one.
fn count_resumed(runs: &Runs, report: &mut ChaosReport) {
    for order in 0..report.orders {
        let ran: Vec<&Vec<(String, u32)>> = ["reserve", "charge", "ship"]
            .iter()
            .filter_map(|step| runs.get(&(order, (*step).to_owned())))
            .collect();
        let workers: std::collections::BTreeSet<u32> =
            ran.iter().flat_map(|r| r.iter().map(|(_, w)| *w)).collect();
        if ran.iter().any(|r| r.len() > 1) {
            report.orders_resumed_mid_step += 1;
        } else if workers.len() > 1 {
            report.orders_resumed_between_steps += 1;
        }
    }
}

/// Every order replays, with the effects' own child keys, running nothing.
async fn replay_all(
    dir: &Path,
    effects: &Effects,
    runs: &Runs,
    report: &ChaosReport,
) -> Result<(), String> {
    let idem = Idempotency::new(SqliteStore::open(dir.join("idem.db")).await.map_err(text)?);
    for order in 0..report.orders {
        let shipped = process(&idem, effects, order).await.map_err(text)?;
        let key = &runs[&(order, "charge".to_owned())][0].0;
        if shipped.charge != format!("charge-{}", &key[..12]) {
            return Err(format!(
                "order {order} replayed another charge: {shipped:?}"
            ));
        }
    }
    let after: i64 = sqlx::query_scalar("SELECT count(*) FROM effects")
        .fetch_one(&effects.pool)
        .await
        .map_err(text)?;
    if after as usize != report.effects {
        return Err("the replay ran a step".into());
    }
    Ok(())
}

/// One order whose carrier is down on the first attempt.
async fn demo(dir: &Path) -> Result<(), Error> {
    let idem = Idempotency::new(SqliteStore::open(dir.join("idem.db")).await?);
    let mut effects = Effects::open(&dir.join("effects.db"), 0, Duration::ZERO).await?;
    effects.carrier_up = false;
    let first = process(&idem, &effects, 7).await;
    println!("first attempt: {first:?}");
    effects.carrier_up = true;
    effects.worker = 1;
    let second = process(&idem, &effects, 7).await?;
    println!("retry: {second:?}");
    let ran: Vec<(String, u32)> = sqlx::query_as("SELECT step, worker FROM effects ORDER BY rowid")
        .fetch_all(&effects.pool)
        .await
        .map_err(store_error)?;
    println!("effects (step, attempt): {ran:?}");
    assert_eq!(ran.len(), 3, "reserve and charge ran once, ship once");
    Ok(())
}

fn scratch_dir() -> PathBuf {
    let dir = std::env::temp_dir().join(format!(
        "idem-order-steps-{}-{:x}",
        std::process::id(),
        idem::store::Token::random().to_u128() as u32
    ));
    std::fs::create_dir_all(&dir).expect("scratch dir");
    dir
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    if worker_from_env().await {
        return Ok(());
    }
    let args: Vec<String> = std::env::args().skip(1).collect();
    let dir = scratch_dir();
    if args.first().map(String::as_str) == Some("chaos") {
        let orders = args.get(1).map_or(Ok(300), |n| n.parse())?;
        let kills = args.get(2).map_or(Ok(6), |n| n.parse())?;
        let exe = std::env::current_exe()?;
        let report = chaos(&dir, orders, kills, |spec| {
            let mut command = Command::new(&exe);
            command.env(WORKER_ENV, spec);
            command
        })
        .await?;
        println!("{report:#?}");
    } else {
        demo(&dir).await?;
    }
    std::fs::remove_dir_all(&dir)?;
    Ok(())
}
