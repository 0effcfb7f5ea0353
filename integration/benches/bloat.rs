//! PostgreSQL's table under churn, with and without the per-table
//! autovacuum settings that `idem::guide::sql` recommends (issue 50).
//!
//! `cargo bench -p idem-integration --bench bloat`. Two tables (schemas)
//! of their own on one server, side by side, so both see the same load:
//! one with the server's autovacuum defaults, one with the guide's
//! settings. Each is first filled with `IDEM_BENCH_BLOAT_LIVE` (default
//! 200,000) live rows, then gets 8 callers making fresh calls with a 5 s
//! TTL and a `spawn_purge` every 5 s (`Purge::default()`), for
//! `IDEM_BENCH_BLOAT_SECS` (default 300). Printed every 30 s per table:
//! `pg_total_relation_size` (indexes and TOAST included), live and dead
//! rows and autovacuum runs (`pg_stat_user_tables`); last, the tuned
//! table's size ÷ the default one's. Server: `IDEM_TEST_DATABASE_URL`,
//! else 127.0.0.1:5432.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use idem::admin::{Purge, spawn_purge};
use idem::{Error, Idempotency, PostgresStore};

const CALLERS: usize = 8;
const TTL: Duration = Duration::from_secs(5);
const SAMPLE_EVERY: Duration = Duration::from_secs(30);
/// The guide's settings (`idem::guide::sql`, "PostgreSQL and bloat").
const TUNED: &str = "autovacuum_vacuum_scale_factor = 0.01, autovacuum_vacuum_threshold = 1000, \
     autovacuum_vacuum_insert_scale_factor = 0.05, autovacuum_analyze_scale_factor = 0.02";

fn env(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.replace('_', "").parse().ok())
        .unwrap_or(default)
}

/// One table under test: its store and its name.
struct Table {
    name: &'static str,
    schema: String,
    store: PostgresStore,
}

/// Size in bytes, live rows, dead rows, autovacuum runs.
type Sample = (i64, i64, i64, i64);

async fn table(url: &str, pool: &sqlx::PgPool, name: &'static str, live: u64) -> Table {
    let schema = format!(
        "bloat_bench_{name}_{:08x}",
        idem::store::Token::random().to_u128() as u32
    );
    let store = PostgresStore::builder()
        .schema(schema.clone())
        .connect(url)
        .await
        .unwrap();
    store.migrate().await.unwrap();
    let t = store.table().to_owned();
    if name == "tuned" {
        let sql = format!("ALTER TABLE {t} SET ({TUNED})");
        sqlx::query(&sql).execute(pool).await.unwrap();
    }
    let fill = format!(
        "INSERT INTO {t} (key, token, fingerprint, record, expires_at, site, created_at) \
         SELECT sha256(($1 || g)::bytea), '\\x{z16}'::bytea, sha256(g::text::bytea), '\\x0103313233'::bytea, \
         now() + interval '1 day', 'bench', now() FROM generate_series(1, $2) g",
        z16 = "00".repeat(16)
    );
    sqlx::query(&fill)
        .bind(&schema)
        .bind(live as i64)
        .execute(pool)
        .await
        .unwrap();
    sqlx::query(&format!("VACUUM ANALYZE {t}"))
        .execute(pool)
        .await
        .unwrap();
    Table {
        name,
        schema,
        store,
    }
}

async fn sample(pool: &sqlx::PgPool, table: &Table) -> Sample {
    sqlx::query_as(
        "SELECT pg_total_relation_size(relid), n_live_tup, n_dead_tup, autovacuum_count \
         FROM pg_stat_user_tables WHERE schemaname = $1 AND relname = 'idem_records'",
    )
    .bind(&table.schema)
    .fetch_one(pool)
    .await
    .unwrap()
}

/// Fresh calls with a short TTL on `idem` until `stop`.
async fn churn(idem: Idempotency, stop: Arc<AtomicBool>, calls: Arc<AtomicU64>) {
    let callers: Vec<_> = (0..CALLERS)
        .map(|_| {
            let (idem, stop, calls) = (idem.clone(), stop.clone(), calls.clone());
            tokio::spawn(async move {
                while !stop.load(Ordering::Relaxed) {
                    let key = idem::store::Token::random().to_u128();
                    let out: Result<u8, Error> = idem
                        .call("bloat-bench", &key)
                        .ttl(TTL)
                        .run(|| async { Ok(1) })
                        .await;
                    out.expect("a call failed");
                    calls.fetch_add(1, Ordering::Relaxed);
                }
            })
        })
        .collect();
    for caller in callers {
        caller.await.unwrap();
    }
}

fn mb(bytes: i64) -> String {
    format!("{:.1}", bytes as f64 / 1e6)
}

async fn run() {
    let url = std::env::var("IDEM_TEST_DATABASE_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".into());
    let (live, secs) = (
        env("IDEM_BENCH_BLOAT_LIVE", 200_000),
        env("IDEM_BENCH_BLOAT_SECS", 300),
    );
    let pool = sqlx::PgPool::connect(&url).await.unwrap();
    let tables = [
        table(&url, &pool, "default", live).await,
        table(&url, &pool, "tuned", live).await,
    ];
    let stop = Arc::new(AtomicBool::new(false));
    let calls: Vec<Arc<AtomicU64>> = tables.iter().map(|_| Arc::default()).collect();
    let mut running = Vec::new();
    let mut purgers = Vec::new();
    for (t, calls) in tables.iter().zip(&calls) {
        let idem = Idempotency::new(t.store.clone());
        running.push(tokio::spawn(churn(idem, stop.clone(), calls.clone())));
        let every = TTL;
        purgers.push(spawn_purge(Arc::new(t.store.clone()), every, Purge::default()).unwrap());
    }
    println!("{live} live rows each, {CALLERS} callers each, {TTL:?} TTL, a purge every {TTL:?}");
    println!("| s | table | MB | live | dead | autovacuums | calls |");
    println!("| --- | --- | --- | --- | --- | --- | --- |");
    let started = Instant::now();
    let mut last = Vec::new();
    while started.elapsed() < Duration::from_secs(secs) {
        tokio::time::sleep(SAMPLE_EVERY).await;
        last.clear();
        for (t, calls) in tables.iter().zip(&calls) {
            let (size, live, dead, vacuums) = sample(&pool, t).await;
            let s = started.elapsed().as_secs();
            let n = calls.load(Ordering::Relaxed);
            println!(
                "| {s} | {} | {} | {live} | {dead} | {vacuums} | {n} |",
                t.name,
                mb(size)
            );
            last.push(size);
        }
    }
    stop.store(true, Ordering::Relaxed);
    for r in running {
        r.await.unwrap();
    }
    drop(purgers);
    println!(
        "tuned ÷ default, total size at the end: **{:.2}**",
        last[1] as f64 / last[0] as f64
    );
    for t in &tables {
        let drop = format!("DROP SCHEMA \"{}\" CASCADE", t.schema);
        sqlx::query(&drop).execute(&pool).await.unwrap();
    }
}

fn main() {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
        .block_on(run());
}
