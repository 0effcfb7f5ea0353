//! How idem's cost moves as a store grows (issue 50): per durable store
//! and size, a table filled through idem, then fresh and replay calls'
//! throughput and p50/p99 at c1 and c32, bytes per record, and a purge of
//! the expired tenth.
//!
//! `IDEM_BENCH_SCALE_SIZES=10000,100000 cargo bench -p idem-integration
//! --bench scale` (the default sizes; add `-- redis` to run one store:
//! `sqlite`, `postgres`, `mysql`, `redis`). Each size gets a table (or key
//! prefix) of its own, filled with that many calls at c32, one in ten
//! with a 1 s TTL (the expired tenth). Then, at c1 and c32: fresh calls
//! (new keys) and replays (random keys of the fill, on the store that
//! wrote them: past its table of keys it saw completed, 16,384, a replay
//! is a full claim). Bytes per record: SQLite the file's pages, PostgreSQL
//! `pg_total_relation_size` (indexes and TOAST included), MariaDB
//! `data_length + index_length` after `ANALYZE`, Redis `MEMORY USAGE` of
//! the prefix's keys (sampled), each over the records. Last, the ratio of
//! each throughput at the largest size to the smallest, in this one
//! process. Servers: `IDEM_TEST_DATABASE_URL`, `IDEM_TEST_MYSQL_URL`,
//! `IDEM_TEST_REDIS_URL`, else the default ports on 127.0.0.1.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use idem::admin::{Admin, Purge};
use idem::{Error, Idempotency, MySqlStore, PostgresStore, RedisStore, SqliteStore};

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

async fn call(idem: &Idempotency, scope: &'static str, key: u64, ttl: Duration) {
    let out: Result<u64, Error> = idem
        .call(scope, &key)
        .ttl(ttl)
        .run(|| async move { Ok(key) })
        .await;
    out.expect("call");
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

/// One size's figures: fresh c1, c32, replay c1, c32, bytes/record, purge.
struct Sized {
    size: u64,
    figs: [Fig; 4],
    bytes: f64,
    purge: Option<(u64, Duration)>,
}

/// Fills `idem` to `size`, measures it; `bytes` reads the store's size.
async fn at_size<A: Admin + 'static>(
    store: Arc<A>,
    idem: Idempotency,
    size: u64,
    bytes: impl AsyncFnOnce() -> f64,
) -> Sized {
    let day = Duration::from_secs(86_400);
    let fill = idem.clone();
    measure(32, size, 0, move |i| {
        let idem = fill.clone();
        let ttl = if i.is_multiple_of(10) {
            Duration::from_secs(1)
        } else {
            day
        };
        async move { call(&idem, "fill", i, ttl).await }
    })
    .await;
    let mut figs = [(0.0, Duration::ZERO, Duration::ZERO); 4];
    for (n, (c, total)) in [(1usize, 1_000u64), (32, 5_000)].into_iter().enumerate() {
        let fresh = idem.clone();
        let from = size + n as u64 * 1_000_000;
        figs[n] = measure(c, total, from, move |i| {
            let idem = fresh.clone();
            async move { call(&idem, "fresh", i, day).await }
        })
        .await;
        let replay = idem.clone();
        figs[2 + n] = measure(c, total, 0, move |i| {
            let idem = replay.clone();
            async move { call(&idem, "fill", fill_key(i, size), day).await }
        })
        .await;
    }
    let bytes = bytes().await / (size + 6_000) as f64;
    tokio::time::sleep(Duration::from_millis(1_100)).await;
    let started = Instant::now();
    let purged = store.purge_with(&Purge::default()).await.expect("purge");
    let purge = (purged.records > 0).then(|| (purged.records, started.elapsed()));
    Sized {
        size,
        figs,
        bytes,
        purge,
    }
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
        println!(
            "| {name} | {} | {} | {} | {} | {} | {:.0} | {purge} |",
            r.size,
            f(&r.figs[0]),
            f(&r.figs[1]),
            f(&r.figs[2]),
            f(&r.figs[3]),
            r.bytes
        );
    }
    if let (Some(first), Some(last)) = (rows.first(), rows.last()) {
        let q = |i: usize| last.figs[i].0 / first.figs[i].0;
        println!(
            "| {name} | **{} ÷ {}** | {:.2} | {:.2} | {:.2} | {:.2} | | |",
            last.size,
            first.size,
            q(0),
            q(1),
            q(2),
            q(3)
        );
    }
}

fn env_url(name: &str, default: &str) -> String {
    std::env::var(name).unwrap_or_else(|_| default.into())
}

fn tag() -> String {
    format!("{:08x}", idem::store::Token::random().to_u128() as u32)
}

async fn sqlite(size: u64) -> Sized {
    let path = std::env::temp_dir().join(format!("idem-scale-{}.db", tag()));
    let store = Arc::new(SqliteStore::open(&path).await.unwrap());
    let idem = Idempotency::new((*store).clone());
    let pool = sqlx::SqlitePool::connect(&format!("sqlite://{}", path.display()))
        .await
        .unwrap();
    let out = at_size(store, idem, size, async || {
        let pages: i64 = sqlx::query_scalar(
            "SELECT page_count * page_size FROM pragma_page_count, pragma_page_size",
        )
        .fetch_one(&pool)
        .await
        .unwrap();
        pages as f64
    })
    .await;
    for suffix in ["", "-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{}{suffix}", path.display()));
    }
    out
}

async fn postgres(size: u64) -> Sized {
    let url = env_url(
        "IDEM_TEST_DATABASE_URL",
        "postgres://postgres@127.0.0.1:5432/test",
    );
    let schema = format!("scale_{}", tag());
    let store = PostgresStore::builder()
        .schema(schema.clone())
        .connect(&url)
        .await
        .unwrap();
    store.migrate().await.unwrap();
    let pool = sqlx::PgPool::connect(&url).await.unwrap();
    let table = store.table().to_owned();
    let store = Arc::new(store);
    let out = at_size(
        store.clone(),
        Idempotency::new((*store).clone()),
        size,
        async || {
            let bytes: i64 =
                sqlx::query_scalar(&format!("SELECT pg_total_relation_size('{table}')"))
                    .fetch_one(&pool)
                    .await
                    .unwrap();
            bytes as f64
        },
    )
    .await;
    sqlx::query(&format!("DROP SCHEMA \"{schema}\" CASCADE"))
        .execute(&pool)
        .await
        .unwrap();
    out
}

async fn mysql(size: u64) -> Sized {
    let url = env_url("IDEM_TEST_MYSQL_URL", "mysql://root@127.0.0.1:3306/test");
    let table = format!("scale_{}", tag());
    let store = MySqlStore::builder()
        .table(table.clone())
        .connect(&url)
        .await
        .unwrap();
    store.migrate().await.unwrap();
    let pool = sqlx::MySqlPool::connect(&url).await.unwrap();
    let store = Arc::new(store);
    let out = at_size(
        store.clone(),
        Idempotency::new((*store).clone()),
        size,
        async || {
            sqlx::query(&format!("ANALYZE TABLE `{table}`"))
                .execute(&pool)
                .await
                .unwrap();
            let bytes: u64 = sqlx::query_scalar(
            "SELECT CAST(data_length + index_length AS UNSIGNED) FROM information_schema.tables \
             WHERE table_schema = DATABASE() AND table_name = ?",
        )
        .bind(&table)
        .fetch_one(&pool)
        .await
        .unwrap();
            bytes as f64
        },
    )
    .await;
    for suffix in ["", "_steps", "_migrations"] {
        let drop = format!("DROP TABLE IF EXISTS `{table}{suffix}`");
        sqlx::query(&drop).execute(&pool).await.unwrap();
    }
    out
}

async fn redis(size: u64) -> Sized {
    let url = env_url("IDEM_TEST_REDIS_URL", "redis://127.0.0.1:6379");
    let prefix = format!("scale-{}:", tag());
    let store = Arc::new(
        RedisStore::builder()
            .prefix(&prefix)
            .connect(&url)
            .await
            .unwrap(),
    );
    let client = redis::Client::open(url).unwrap();
    let mut conn = client.get_multiplexed_async_connection().await.unwrap();
    let out = at_size(
        store.clone(),
        Idempotency::new((*store).clone()),
        size,
        async || {
            let keys = redis_keys(&mut conn, &prefix).await;
            let sample = &keys[..keys.len().min(2_000)];
            let mut sum = 0u64;
            for key in sample {
                let used: Option<u64> = redis::cmd("MEMORY")
                    .arg("USAGE")
                    .arg(key)
                    .query_async(&mut conn)
                    .await
                    .unwrap();
                sum += used.unwrap_or(0);
            }
            sum as f64 * keys.len() as f64 / sample.len().max(1) as f64
        },
    )
    .await;
    for key in redis_keys(&mut conn, &prefix).await {
        let _: () = redis::cmd("UNLINK")
            .arg(key)
            .query_async(&mut conn)
            .await
            .unwrap();
    }
    out
}

/// The keys under `prefix`, as bytes: idem's keys hold the record key's
/// raw hash, which is not UTF-8.
async fn redis_keys(conn: &mut redis::aio::MultiplexedConnection, prefix: &str) -> Vec<Vec<u8>> {
    let mut keys = Vec::new();
    let mut cursor = 0u64;
    loop {
        let (next, batch): (u64, Vec<Vec<u8>>) = redis::cmd("SCAN")
            .arg(cursor)
            .arg("MATCH")
            .arg(format!("{prefix}*"))
            .arg("COUNT")
            .arg(5_000)
            .query_async(conn)
            .await
            .unwrap();
        keys.extend(batch);
        if next == 0 {
            return keys;
        }
        cursor = next;
    }
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
    let wants = |s: &str| filter.as_deref().is_none_or(|f| s.contains(f));
    println!(
        "| store | records | fresh c1 calls/s (p50 / p99 ms) | fresh c32 | replay c1 | replay c32 | bytes/record | purge of the expired tenth |"
    );
    println!("| --- | --- | --- | --- | --- | --- | --- | --- |");
    macro_rules! each {
        ($($name:literal => $label:literal, $f:ident;)+) => {$(
            if wants($name) {
                let mut rows = Vec::new();
                for &size in &sizes {
                    rows.push($f(size).await);
                }
                print($label, &rows);
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
