//! Calls' latency beside a purge of many expired rows, against the same
//! calls without one, in one process (issue 50).
//!
//! `cargo bench -p idem-integration --bench purge` (add `-- postgres` to
//! run one store: `sqlite`, `postgres`, `mysql`). Per store and round:
//! `IDEM_BENCH_PURGE_ROWS` (default 100,000) expired rows are written
//! straight into the store's table, then 8 callers make fresh idem calls
//! for 3 s without a purge, then again while `Admin::purge_with` deletes
//! those rows, once per pacing in `IDEM_BENCH_PURGE_PACINGS` ("batch/pause
//! in ms", comma-separated; by default `1000/20,5000/0`: `Purge::default()`
//! and the pacing before issue 50), in a rotated order.
//! Printed: each pacing's median round (purge time, p50 and p99 of the
//! calls without and during the purge) and **p99 ratio**, the median over
//! the rounds (`IDEM_BENCH_ROUNDS`, default 3) of p99 during ÷ p99
//! without *in the same round*. Servers: `IDEM_TEST_DATABASE_URL`,
//! `IDEM_TEST_MYSQL_URL`, else the default ports on 127.0.0.1.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant, SystemTime};

use idem::admin::{Admin, Purge};
use idem::{Error, Idempotency, MySqlStore, PostgresStore, SqliteStore};

const CALLERS: usize = 8;
const WITHOUT: Duration = Duration::from_secs(3);
/// A record's bytes as idem stores a small one.
const RECORD: &str = "0103313233";

fn env(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.replace('_', "").parse().ok())
        .unwrap_or(default)
}

/// Latencies' p50 and p99.
#[derive(Clone, Copy)]
struct Lat {
    p50: Duration,
    p99: Duration,
}

/// Runs `CALLERS` callers making fresh calls on `idem` until `done`
/// resolves; their latencies.
async fn calls_until(idem: &Idempotency, done: impl Future<Output = ()>) -> Lat {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let stop = Arc::new(AtomicBool::new(false));
    let tasks: Vec<_> = (0..CALLERS)
        .map(|_| {
            let (idem, stop) = (idem.clone(), stop.clone());
            tokio::spawn(async move {
                let mut lat = Vec::new();
                while !stop.load(Ordering::Relaxed) {
                    let key = NEXT.fetch_add(1, Ordering::Relaxed);
                    let t = Instant::now();
                    let out: Result<u64, Error> = idem
                        .call("purge-bench", &key)
                        .run(|| async move { Ok(key) })
                        .await;
                    out.expect("a call beside the purge failed");
                    lat.push(t.elapsed());
                }
                lat
            })
        })
        .collect();
    done.await;
    stop.store(true, Ordering::Relaxed);
    let mut all = Vec::new();
    for task in tasks {
        all.extend(task.await.unwrap());
    }
    all.sort_unstable();
    let at = |q: f64| all[((all.len() as f64 * q) as usize).min(all.len() - 1)];
    Lat {
        p50: at(0.5),
        p99: at(0.99),
    }
}

/// Hex of a random 32-byte key.
fn key_hex() -> String {
    let (a, b) = (
        idem::store::Token::random().to_u128(),
        idem::store::Token::random().to_u128(),
    );
    format!("{a:032x}{b:032x}")
}

/// A SQL statement inserting `n` expired completed rows into `table`,
/// `row` making one row's values from a key's hex.
fn inserts(table: &str, n: usize, row: impl Fn(&str) -> String) -> Vec<String> {
    let cols = "(`key`, token, fingerprint, record, expires_at, site, created_at)";
    (0..n)
        .step_by(2_000)
        .map(|start| {
            let rows: Vec<String> = (start..n.min(start + 2_000))
                .map(|_| row(&key_hex()))
                .collect();
            format!("INSERT INTO {table} {cols} VALUES {}", rows.join(","))
        })
        .collect()
}

/// Writes `n` expired rows into the store's table.
enum Filler {
    Sqlite(sqlx::SqlitePool),
    Postgres(sqlx::PgPool, String),
    MySql(sqlx::MySqlPool, String),
}

impl Filler {
    async fn fill(&self, n: usize) {
        match self {
            Filler::Sqlite(pool) => {
                let now = SystemTime::now()
                    .duration_since(SystemTime::UNIX_EPOCH)
                    .unwrap();
                let ago = |h: u128| (now.as_millis() - h * 3_600_000).to_string();
                let (expired, created) = (ago(1), ago(2));
                for sql in inserts("idem_records", n, |k| {
                    format!(
                        "(X'{k}', X'{z16}', X'{k}', X'{RECORD}', {expired}, 'bench', {created})",
                        z16 = "00".repeat(16)
                    )
                }) {
                    sqlx::query(&sql.replace('`', ""))
                        .execute(pool)
                        .await
                        .unwrap();
                }
            }
            Filler::Postgres(pool, table) => {
                let sql = format!(
                    "INSERT INTO {table} (key, token, fingerprint, record, expires_at, site, created_at) \
                     SELECT sha256(($1 || g)::bytea), '\\x{z16}'::bytea, sha256(g::text::bytea), '\\x{RECORD}'::bytea, \
                     now() - interval '1 hour', 'bench', now() - interval '2 hours' FROM generate_series(1, $2) g",
                    z16 = "00".repeat(16)
                );
                sqlx::query(&sql)
                    .bind(key_hex())
                    .bind(n as i64)
                    .execute(pool)
                    .await
                    .unwrap();
                sqlx::query(&format!("VACUUM ANALYZE {table}"))
                    .execute(pool)
                    .await
                    .unwrap();
            }
            Filler::MySql(pool, table) => {
                for sql in inserts(table, n, |k| {
                    format!(
                        "(UNHEX('{k}'), UNHEX('{z16}'), UNHEX('{k}'), UNHEX('{RECORD}'), \
                         UTC_TIMESTAMP(6) - INTERVAL 1 HOUR, 'bench', UTC_TIMESTAMP(6) - INTERVAL 2 HOUR)",
                        z16 = "00".repeat(16)
                    )
                }) {
                    sqlx::query(&sql).execute(pool).await.unwrap();
                }
            }
        }
    }
}

/// One pacing's figures in one round.
struct Round {
    purge: Duration,
    without: Lat,
    during: Lat,
}

async fn round<A: Admin + Clone + 'static>(
    store: &A,
    filler: &Filler,
    idem: &Idempotency,
    rows: usize,
    pacing: Purge,
) -> Round {
    filler.fill(rows).await;
    let without = calls_until(idem, tokio::time::sleep(WITHOUT)).await;
    let started = Instant::now();
    let purging = {
        let store = store.clone();
        tokio::spawn(async move { store.purge_with(&pacing).await })
    };
    let mut purged = None;
    let during = calls_until(idem, async {
        purged = Some(purging.await.unwrap().expect("purge"));
    })
    .await;
    let purge = started.elapsed();
    assert!(
        purged.unwrap().records >= rows as u64,
        "the purge deleted the rows"
    );
    Round {
        purge,
        without,
        during,
    }
}

/// `IDEM_BENCH_PURGE_PACINGS`, "batch/pause_ms" comma-separated; by
/// default `Purge::default()` and the pacing before issue 50.
fn pacings() -> Vec<(String, Purge)> {
    let spec =
        std::env::var("IDEM_BENCH_PURGE_PACINGS").unwrap_or_else(|_| "1000/20,5000/0".into());
    spec.split(',')
        .map(|pacing| {
            let (batch, pause) = pacing
                .split_once('/')
                .and_then(|(b, p)| Some((b.parse().ok()?, p.parse().ok()?)))
                .expect("IDEM_BENCH_PURGE_PACINGS: batch/pause_ms, comma-separated");
            let label = format!("{batch} rows, {pause} ms pause");
            (
                label,
                Purge::default()
                    .batch(batch)
                    .pause(Duration::from_millis(pause)),
            )
        })
        .collect()
}

fn median<T: Copy>(mut v: Vec<T>, key: impl Fn(&T) -> f64) -> T {
    v.sort_by(|a, b| key(a).total_cmp(&key(b)));
    v[v.len() / 2]
}

async fn bench<A: Admin + Clone + 'static>(name: &str, store: A, filler: Filler) {
    let (rows, rounds) = (
        env("IDEM_BENCH_PURGE_ROWS", 100_000),
        env("IDEM_BENCH_ROUNDS", 3),
    );
    let idem = Idempotency::new(store.clone());
    let pacings = pacings();
    let mut results: Vec<Vec<Round>> = pacings.iter().map(|_| Vec::new()).collect();
    for r in 0..rounds {
        // Rotated, so that no pacing always runs first.
        for i in (0..pacings.len()).map(|i| (i + r) % pacings.len()) {
            results[i].push(round(&store, &filler, &idem, rows, pacings[i].1).await);
        }
    }
    for (i, rounds) in results.into_iter().enumerate() {
        let ratio = median(
            rounds
                .iter()
                .map(|r| r.during.p99.as_secs_f64() / r.without.p99.as_secs_f64())
                .collect(),
            |x| *x,
        );
        let mid = median(
            rounds
                .iter()
                .map(|r| (r.purge, r.without, r.during))
                .collect(),
            |r| r.0.as_secs_f64(),
        );
        let ms = |d: Duration| format!("{:.1}", d.as_secs_f64() * 1e3);
        println!(
            "| {name} | {} | {rows} | {:.1} s | {} / {} | {} / {} | **{ratio:.2}** |",
            &pacings[i].0,
            mid.0.as_secs_f64(),
            ms(mid.1.p50),
            ms(mid.1.p99),
            ms(mid.2.p50),
            ms(mid.2.p99),
        );
    }
}

async fn run(filter: Option<String>) {
    let wants = |s: &str| filter.as_deref().is_none_or(|f| s.contains(f));
    println!(
        "| store | pacing | expired rows | purge took | without p50 / p99 ms | during p50 / p99 ms | p99 ratio |"
    );
    println!("| --- | --- | --- | --- | --- | --- | --- |");
    if wants("sqlite") {
        let path = std::env::temp_dir().join(format!("idem-purge-bench-{}.db", key_hex()));
        let store = SqliteStore::open(&path).await.unwrap();
        let pool = sqlx::SqlitePool::connect(&format!("sqlite://{}", path.display()))
            .await
            .unwrap();
        bench("SQLite", store, Filler::Sqlite(pool)).await;
    }
    if wants("postgres") {
        let url = std::env::var("IDEM_TEST_DATABASE_URL")
            .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".into());
        let schema = format!("purge_bench_{}", &key_hex()[..8]);
        let store = PostgresStore::builder()
            .schema(schema.clone())
            .connect(&url)
            .await
            .unwrap();
        store.migrate().await.unwrap();
        let pool = sqlx::PgPool::connect(&url).await.unwrap();
        bench(
            "PostgreSQL",
            store.clone(),
            Filler::Postgres(pool.clone(), store.table().to_owned()),
        )
        .await;
        sqlx::query(&format!("DROP SCHEMA \"{schema}\" CASCADE"))
            .execute(&pool)
            .await
            .unwrap();
    }
    if wants("mysql") {
        let url = std::env::var("IDEM_TEST_MYSQL_URL")
            .unwrap_or_else(|_| "mysql://root@127.0.0.1:3306/test".into());
        let table = format!("purge_bench_{}", &key_hex()[..8]);
        let store = MySqlStore::builder()
            .table(table.clone())
            .connect(&url)
            .await
            .unwrap();
        store.migrate().await.unwrap();
        let pool = sqlx::MySqlPool::connect(&url).await.unwrap();
        bench(
            "MariaDB",
            store.clone(),
            Filler::MySql(pool.clone(), store.table().to_owned()),
        )
        .await;
        for suffix in ["", "_steps", "_migrations"] {
            let drop = format!("DROP TABLE IF EXISTS `{table}{suffix}`");
            sqlx::query(&drop).execute(&pool).await.unwrap();
        }
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
