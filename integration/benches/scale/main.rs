//! How idem's cost moves as a store grows (issue 50): per durable store
//! and size, a table filled through idem, then fresh and replay calls'
//! throughput and p50/p99 at c1 and c32, bytes per record, and a purge of
//! the expired tenth.
//!
//! `IDEM_BENCH_SCALE_SIZES=10000,100000 cargo bench -p idem-integration
//! --bench scale` (the default sizes; add `-- redis` to run one store:
//! `sqlite`, `postgres`, `mysql`, `redis`). Each size gets a table (or key
//! prefix) of its own, filled with that many calls at c32, one in ten
//! with a 1 s TTL (the expired tenth), then settled as a table in service
//! would be (PostgreSQL `VACUUM (ANALYZE)`, InnoDB's undo purged, SQLite's
//! WAL checkpointed). Then, at c1 and c32: fresh calls
//! (new keys) and replays of random keys of the fill, twice: on the store
//! that wrote them (past its table of keys it saw completed, 16,384, a
//! replay is a full claim) and on another replica (a store connected
//! afresh, which saw none of them; each key replayed once), the three
//! kinds in an order rotated each round. Bytes per record: SQLite the
//! file's pages, PostgreSQL
//! `pg_total_relation_size` (indexes and TOAST included), MariaDB
//! `data_length + index_length` after `ANALYZE`, Redis `MEMORY USAGE` of
//! the prefix's keys (sampled), each over the records. Last, the ratio of
//! each throughput at the largest size to the smallest, in this one
//! process. Each measurement also prints (stderr) its calls/s and the
//! process's context switches per call. Servers: `IDEM_TEST_DATABASE_URL`, `IDEM_TEST_MYSQL_URL`,
//! `IDEM_TEST_REDIS_URL`, else the default ports on 127.0.0.1.

#[path = "../shared/mysql_tables.rs"]
mod mysql_tables;
#[path = "../shared/redis_keys.rs"]
mod redis_keys;
mod stores;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, LazyLock};
use std::time::{Duration, Instant};

use idem::admin::{Admin, Purge};
use idem::{Error, Idempotency};
use stores::{mysql, postgres, redis, sqlite};

/// Throughput, p50, p99 of one measurement.
type Fig = (f64, Duration, Duration);

/// `total` calls of `call(i)` over `c` tasks, `i` counting from `from`.
async fn measure<F, Fut>(c: usize, total: u64, from: u64, call: F) -> Fig
where
    F: Fn(u64) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = ()> + Send,
{
    let (call, next) = (Arc::new(call), Arc::new(AtomicU64::new(from)));
    let start = Instant::now();
    let tasks: Vec<_> = (0..c)
        .map(|_| {
            let (call, next) = (call.clone(), next.clone());
            tokio::spawn(async move {
                let mut lat = Vec::new();
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    if i >= from + total {
                        return lat;
                    }
                    let t = Instant::now();
                    call(i).await;
                    lat.push(t.elapsed());
                }
            })
        })
        .collect();
    let mut all = Vec::new();
    for task in tasks {
        all.extend(task.await.unwrap());
    }
    let secs = start.elapsed().as_secs_f64();
    all.sort_unstable();
    let at = |q: f64| all[((all.len() as f64 * q) as usize).min(all.len() - 1)];
    (all.len() as f64 / secs, at(0.5), at(0.99))
}

/// Calls whose claim lapsed before their completion (the expired tenth's
/// 1 s lease outlived by a stall of the server, such as a checkpoint's
/// writes during a large fill), each then called again and taken over.
static LAPSED: AtomicU64 = AtomicU64::new(0);

async fn call(idem: &Idempotency, scope: &'static str, key: u64, ttl: Duration) {
    loop {
        let out: Result<u64, Error> = idem
            .call(scope, &key)
            .ttl(ttl)
            .run(|| async move { Ok(key) })
            .await;
        match out {
            Err(Error::LeaseLost { .. }) if ttl < Duration::from_secs(2) => {
                LAPSED.fetch_add(1, Ordering::Relaxed);
            }
            out => {
                out.expect("call");
                return;
            }
        }
    }
}

/// A key of the fill, spread over it (a multiplicative hash), never one
/// of the expired tenth.
fn fill_key(i: u64, size: u64) -> u64 {
    let k = i.wrapping_mul(0x9E37_79B9_7F4A_7C15) % size;
    if k.is_multiple_of(10) {
        (k + 1) % size
    } else {
        k
    }
}

/// A key of the fill for the `i`th replay on another replica: distinct
/// for each `i` below nine tenths of `size` (a permutation of the kept
/// keys), so that no replay finds its key in that replica's table.
fn spread_key(i: u64, size: u64) -> u64 {
    let kept = size / 10 * 9;
    let j = (u128::from(i % kept) * 1_000_003 % u128::from(kept)) as u64;
    j / 9 * 10 + j % 9 + 1
}

/// One store at one size: its admin, the idem that filled it, how to
/// connect another replica to it, how to read its bytes, and how to let
/// the server finish the fill's upkeep before the rounds.
pub(crate) struct Table<R, B, S> {
    pub size: u64,
    pub admin: Arc<dyn Admin>,
    pub idem: Idempotency,
    pub replica: R,
    pub bytes: B,
    pub settle: S,
}

/// One size's figures (the median round of each): fresh c1, c32, replay
/// c1, c32 on the store that filled, on another replica; bytes/record,
/// purge; and each round's figures, for the ratios.
pub(crate) struct Sized {
    size: u64,
    figs: [Fig; 6],
    rounds: Vec<[Fig; 6]>,
    bytes: f64,
    purge: Option<(u64, Duration)>,
}

const DAY: Duration = Duration::from_secs(86_400);

/// Fills `idem` with `size` calls at c32, one in ten with a 1 s TTL.
async fn fill(idem: &Idempotency, size: u64) {
    let fill = idem.clone();
    measure(32, size, 0, move |i| {
        let idem = fill.clone();
        let ttl = if i.is_multiple_of(10) {
            Duration::from_secs(1)
        } else {
            DAY
        };
        async move { call(&idem, "fill", i, ttl).await }
    })
    .await;
}

/// Calls per figure at c1 and c32: `IDEM_BENCH_SCALE_CALLS` ("1000,5000"),
/// read once. Their sum is at most nine tenths of the smallest size, so
/// that each replay on another replica finds a key new to it.
static CALLS: LazyLock<(u64, u64)> = LazyLock::new(|| {
    let calls = env_url("IDEM_BENCH_SCALE_CALLS", "1000,5000");
    let mut calls = calls.split(',').map(|n| n.trim().parse().ok());
    match (calls.next().flatten(), calls.next().flatten()) {
        (Some(c1), Some(c32)) => (c1, c32),
        _ => panic!("IDEM_BENCH_SCALE_CALLS: two counts, comma-separated"),
    }
});

/// The three kinds of calls in a round, by their index there.
const KINDS: [&str; 3] = ["fresh", "replay", "replay on another replica"];

/// One round's six figures on `t`, `replica` being new to it. At each
/// concurrency, fresh calls, replays on `t` and replays on `replica` run
/// in an order rotated by `round`: whichever runs first meets the server
/// as the one before left it (a fresh call's writes still being flushed),
/// so no kind always follows another.
async fn round<R, B, S>(t: &Table<R, B, S>, replica: &Idempotency, round: u64) -> [Fig; 6] {
    let size = t.size;
    let mut figs = [(0.0, Duration::ZERO, Duration::ZERO); 6];
    let (c1, c32) = *CALLS;
    for (n, (c, total)) in [(1usize, c1), (32, c32)].into_iter().enumerate() {
        for kind in (0..3).map(|k| (k + round as usize) % 3) {
            // Who calls, under which scope, from which index, on which key.
            let (idem, scope, from, key): (_, _, _, fn(u64, u64) -> u64) = match kind {
                0 => (
                    &t.idem,
                    "fresh",
                    1 << 40 | round << 24 | (n as u64) << 20,
                    |i, _| i,
                ),
                1 => (&t.idem, "fill", round * (c1 + c32), fill_key),
                _ => (replica, "fill", n as u64 * c1, spread_key),
            };
            let idem = idem.clone();
            let switched = switches();
            figs[2 * kind + n] = measure(c, total, from, move |i| {
                let idem = idem.clone();
                async move { call(&idem, scope, key(i, size), DAY).await }
            })
            .await;
            if let (Some(before), Some(after)) = (switched, switches()) {
                let each = (after - before) as f64 / total as f64;
                let (name, per_s) = (KINDS[kind], figs[2 * kind + n].0);
                eprintln!(
                    "scale: {size} records, {name} c{c}: {per_s:.0} calls/s, {each:.2} context switches a call"
                );
            }
        }
    }
    figs
}

/// The context switches of this process's threads so far (Linux), which
/// at c1 tell how many times a call waited for another thread: a thread
/// hop costs this 2-core VM more than an indexed lookup does.
fn switches() -> Option<u64> {
    let mut n = 0;
    for task in std::fs::read_dir("/proc/self/task").ok()? {
        let status = std::fs::read_to_string(task.ok()?.path().join("status")).unwrap_or_default();
        n += status
            .lines()
            .filter(|line| line.contains("ctxt_switches"))
            .filter_map(|line| line.split_whitespace().last()?.parse::<u64>().ok())
            .sum::<u64>();
    }
    Some(n)
}

/// Fills every table and lets the server settle it, measures them in
/// `IDEM_BENCH_ROUNDS` rounds (3), the sizes in a rotated order each
/// round, then reads their bytes and purges their expired tenth.
pub(crate) async fn scale<R, B, S>(tables: &[Table<R, B, S>]) -> Vec<Sized>
where
    R: AsyncFn() -> Idempotency,
    B: AsyncFn() -> f64,
    S: AsyncFn(),
{
    for t in tables {
        fill(&t.idem, t.size).await;
    }
    // A store in service has had its upkeep (vacuum, undo purge,
    // checkpoint) run as it grew; a fill of minutes leaves it all to do,
    // and a round that met it would measure the server's backlog.
    for t in tables {
        let started = Instant::now();
        (t.settle)().await;
        eprintln!(
            "scale: {} records settled in {:.1} s",
            t.size,
            started.elapsed().as_secs_f64()
        );
    }
    let rounds = env_url("IDEM_BENCH_ROUNDS", "3").parse().unwrap_or(3u64);
    let mut figs = vec![Vec::new(); tables.len()];
    for r in 0..rounds {
        for k in 0..tables.len() {
            let k = (k + r as usize) % tables.len();
            let replica = (tables[k].replica)().await;
            let warm = replica.clone();
            measure(32, 320, 1 << 41 | r << 24, move |i| {
                let idem = warm.clone();
                async move { call(&idem, "warm", i, DAY).await }
            })
            .await;
            figs[k].push(round(&tables[k], &replica, r).await);
        }
    }
    let lapsed = LAPSED.swap(0, Ordering::Relaxed);
    if lapsed > 0 {
        eprintln!("scale: {lapsed} claims of the expired tenth lapsed in the fill; called again");
    }
    let mut out = Vec::new();
    for (t, rounds) in tables.iter().zip(figs) {
        let (c1, c32) = *CALLS;
        let written = rounds.len() as u64 * (c1 + c32 + 320);
        let bytes = (t.bytes)().await / (t.size + written) as f64;
        tokio::time::sleep(Duration::from_millis(1_100)).await;
        let started = Instant::now();
        let purged = t.admin.purge_with(&Purge::default()).await.expect("purge");
        out.push(Sized {
            size: t.size,
            figs: std::array::from_fn(|i| median(rounds.iter().map(|f| f[i]))),
            rounds,
            bytes,
            purge: (purged.records > 0).then(|| (purged.records, started.elapsed())),
        });
    }
    out
}

/// The figure of median throughput.
fn median(figs: impl Iterator<Item = Fig>) -> Fig {
    let mut figs: Vec<Fig> = figs.collect();
    figs.sort_by(|a, b| a.0.total_cmp(&b.0));
    figs[figs.len() / 2]
}

fn print(name: &str, rows: &[Sized]) {
    let f = |x: &Fig| {
        format!(
            "{:.0} ({:.2} / {:.2})",
            x.0,
            x.1.as_secs_f64() * 1e3,
            x.2.as_secs_f64() * 1e3
        )
    };
    for r in rows {
        let purge = r
            .purge
            .map_or("n/a (expire on their own)".into(), |(n, d)| {
                format!("{n} in {:.2} s", d.as_secs_f64())
            });
        let figs: Vec<_> = r.figs.iter().map(f).collect();
        println!(
            "| {name} | {} | {} | {:.0} | {purge} |",
            r.size,
            figs.join(" | "),
            r.bytes
        );
    }
    if let (Some(first), Some(last)) = (rows.first(), rows.last()) {
        // Per round, then the median: a drift of the machine moves both.
        let q: Vec<_> = (0..6)
            .map(|i| {
                let mut q: Vec<f64> = (first.rounds.iter().zip(&last.rounds))
                    .map(|(a, b)| b[i].0 / a[i].0)
                    .collect();
                q.sort_by(f64::total_cmp);
                format!("{:.2}", q[q.len() / 2])
            })
            .collect();
        println!(
            "| {name} | **{} ÷ {}** | {} | | |",
            last.size,
            first.size,
            q.join(" | ")
        );
    }
}

pub(crate) fn env_url(name: &str, default: &str) -> String {
    std::env::var(name).unwrap_or_else(|_| default.into())
}

pub(crate) fn tag() -> String {
    format!("{:08x}", idem::store::Token::random().to_u128() as u32)
}

async fn run(filter: Option<String>) {
    let sizes: Vec<u64> = env_url("IDEM_BENCH_SCALE_SIZES", "10000,100000")
        .split(',')
        .map(|s| {
            s.trim()
                .replace('_', "")
                .parse()
                .expect("IDEM_BENCH_SCALE_SIZES: sizes, comma-separated")
        })
        .collect();
    let (c1, c32) = *CALLS;
    let smallest = sizes.iter().min().copied().unwrap_or(0);
    assert!(
        c1 + c32 <= smallest / 10 * 9,
        "IDEM_BENCH_SCALE_CALLS: at most nine tenths of the smallest size in all"
    );
    let wants = |s: &str| filter.as_deref().is_none_or(|f| s.contains(f));
    println!(
        "| store | records | fresh c1 calls/s (p50 / p99 ms) | fresh c32 | replay c1 | replay c32 | replay c1, another replica | replay c32, another replica | bytes/record | purge of the expired tenth |"
    );
    println!("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |");
    macro_rules! each {
        ($($name:literal => $label:literal, $f:ident;)+) => {$(
            if wants($name) {
                print($label, &$f(&sizes).await);
            }
        )+};
    }
    each! {
        "sqlite" => "SQLite", sqlite;
        "postgres" => "PostgreSQL", postgres;
        "mysql" => "MariaDB", mysql;
        "redis" => "Redis 7", redis;
    }
}

fn main() {
    let filter = std::env::args().skip(1).find(|a| !a.starts_with('-'));
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
        .block_on(run(filter));
}
