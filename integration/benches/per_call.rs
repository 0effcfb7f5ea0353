//! Runs N calls of one kind in a loop, for counting instructions per call
//! with callgrind (the throughput bench times calls; this counts them).
//!
//! ```sh
//! cargo bench -p idem-integration --bench per_call --no-run
//! BIN=$(ls -t $CARGO_TARGET_DIR/release/deps/per_call-* | grep -v '\.d$' | head -1)
//! for n in 10000 20000; do
//!   valgrind --tool=callgrind --callgrind-out-file=/tmp/cg.$n $BIN memory-fresh $n 2>&1 | grep refs
//! done
//! ```
//!
//! The difference of the two totals divided by the difference of the
//! counts is the cost of one call, set-up and warm-up excluded. Kinds:
//! `memory-fresh`, `memory-replay`, `hand-fresh`, `hand-replay` (the
//! `Mutex<HashMap>` dedupe of the throughput bench), `sqlite-fresh`,
//! `sqlite-replay`, `raw-sqlite-fresh`, `raw-sqlite-replay` (the
//! throughput bench's raw statements, on a pool opened as the store opens
//! its own), `postgres-replay`, `raw-postgres-replay` (a `SELECT` by key
//! on one dedicated connection; the client's instructions only: the
//! server is another process; `IDEM_TEST_DATABASE_URL`), `redis-replay`,
//! `redis-fresh` (the claim's pipeline and the completion's script),
//! `raw-redis-replay` (a `GET` on a `ConnectionManager`, as the throughput
//! bench sends it; `IDEM_TEST_REDIS_URL`), `encode-u64`, `decode-u64`, `key`; `attribute-fresh` and
//! `attribute-replay` (the memory kinds through `#[idempotent]`); `memory-yield` (a fresh
//! key whose body awaits once, so the runtime's other tasks run between
//! calls) and `memory-yield-64` (the same from 64 tasks at once).

#[path = "shared/redis_keys.rs"]
mod redis_keys;

use std::collections::HashMap;
use std::sync::Mutex;

use idem::key::RecordKey;
use idem::{Error, Idempotency, MemoryStore, SqliteStore};
use sqlx::SqlitePool;
use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions, SqliteSynchronous};

const WARM: u64 = 1_000;
const HOT: u64 = 1_000;

async fn call(idem: &Idempotency, key: u64) {
    let out: Result<u64, Error> = idem
        .call("bench", &key)
        .run(|| async move { Ok(std::hint::black_box(key)) })
        .await;
    out.expect("idem call");
}

/// The same call through `#[idempotent]`: with the `testing` feature the
/// attribute registers a static `Site`, which must cost no instruction
/// per call (`attribute-fresh`, `attribute-replay`).
#[idem::idempotent(key = key, scope = "bench", store = idem, skip(idem))]
async fn attributed(idem: &Idempotency, key: u64) -> Result<u64, Error> {
    Ok(std::hint::black_box(key))
}

fn hand(map: &Mutex<HashMap<u64, u64>>, key: u64) -> u64 {
    if let Some(v) = map.lock().unwrap().get(&key) {
        return *v;
    }
    let v = std::hint::black_box(key);
    map.lock().unwrap().insert(key, v);
    v
}

/// Removes the database file and its WAL and shared-memory files.
fn remove(path: &std::path::Path) {
    for suffix in ["", "-wal", "-shm"] {
        let mut name = path.as_os_str().to_owned();
        name.push(suffix);
        let _ = std::fs::remove_file(name);
    }
}

async fn sqlite_store() -> (SqliteStore, std::path::PathBuf) {
    let path = std::env::temp_dir().join(format!(
        "idem-per-call-{:x}.db",
        idem::store::Token::random().to_u128() as u32
    ));
    (SqliteStore::open(&path).await.expect("SQLite file"), path)
}

async fn raw_pool(path: &std::path::Path) -> SqlitePool {
    let options = SqliteConnectOptions::new()
        .filename(path)
        .journal_mode(SqliteJournalMode::Wal)
        .synchronous(SqliteSynchronous::Full);
    let pool = SqlitePoolOptions::new()
        .max_connections(4)
        .connect_with(options)
        .await
        .expect("SQLite pool");
    sqlx::query("CREATE TABLE raw_records (key INTEGER PRIMARY KEY, token BLOB NOT NULL, record BLOB, expires_at INTEGER NOT NULL)")
        .execute(&pool)
        .await
        .expect("raw table");
    pool
}

/// The throughput bench's raw fresh call: `INSERT … ON CONFLICT DO
/// NOTHING`, then `UPDATE`.
async fn raw_fresh(pool: &SqlitePool, key: i64) {
    sqlx::query("INSERT INTO raw_records (key, token, expires_at) VALUES (?1, ?2, CAST((julianday('now') - 2440587.5) * 86400000.0 AS INTEGER) + 30000) ON CONFLICT DO NOTHING")
        .bind(key)
        .bind(&[7u8; 16][..])
        .execute(pool)
        .await
        .expect("raw insert");
    sqlx::query("UPDATE raw_records SET record = ?2, expires_at = CAST((julianday('now') - 2440587.5) * 86400000.0 AS INTEGER) + 86400000 WHERE key = ?1 AND token = ?3")
        .bind(key)
        .bind(&b"\x01\x00\x031"[..])
        .bind(&[7u8; 16][..])
        .execute(pool)
        .await
        .expect("raw update");
}

async fn raw_replay(pool: &SqlitePool, key: i64) {
    let row: Option<(Vec<u8>,)> = sqlx::query_as("SELECT record FROM raw_records WHERE key = ?1")
        .bind(key)
        .fetch_optional(pool)
        .await
        .expect("raw select");
    assert!(row.is_some());
}

/// A replay on `PostgresStore`, or the plain `SELECT` of the throughput
/// bench on one dedicated connection, in a schema of its own.
async fn postgres(kind: &str, n: u64) {
    use sqlx::Connection;
    let url = std::env::var("IDEM_TEST_DATABASE_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".into());
    let schema = format!(
        "idem_per_call_{:x}",
        idem::store::Token::random().to_u128() as u32
    );
    let store = idem::PostgresStore::builder()
        .schema(&schema)
        .max_connections(1)
        .connect(&url)
        .await
        .expect("PostgreSQL");
    store.migrate().await.expect("migrate");
    let idem = Idempotency::new(store.clone());
    for k in 0..HOT {
        call(&idem, u64::MAX - k).await;
    }
    let mut conn = sqlx::PgConnection::connect(&url).await.expect("connection");
    let select = format!("SELECT record FROM \"{schema}\".idem_records WHERE key = $1");
    let keys: Vec<RecordKey> = (0..HOT)
        .map(|k| RecordKey::new("bench", &(u64::MAX - k)))
        .collect();
    for i in 0..n {
        if kind == "postgres-replay" {
            call(&idem, u64::MAX - i % HOT).await;
        } else {
            let row: Option<(Vec<u8>,)> = sqlx::query_as(&select)
                .bind(&keys[(i % HOT) as usize].as_bytes()[..])
                .fetch_optional(&mut conn)
                .await
                .expect("raw select");
            assert!(row.is_some());
        }
    }
    sqlx::query(&format!("DROP SCHEMA \"{schema}\" CASCADE"))
        .execute(&mut conn)
        .await
        .expect("drop schema");
    store.close().await;
}

/// A replay or a fresh call on `RedisStore`, or a plain `GET` of a key of
/// the same size. The keys are removed afterwards: the server is shared.
async fn redis(kind: &str, n: u64) {
    let url =
        std::env::var("IDEM_TEST_REDIS_URL").unwrap_or_else(|_| "redis://127.0.0.1:6379".into());
    let prefix = format!(
        "idem-per-call-{:x}:",
        idem::store::Token::random().to_u128() as u32
    );
    let store = idem::RedisStore::builder()
        .prefix(&prefix)
        .connect(&url)
        .await
        .expect("Redis");
    let idem = Idempotency::new(store);
    for k in 0..HOT {
        call(&idem, u64::MAX - k).await;
    }
    let client = redis::Client::open(url.as_str()).expect("Redis URL");
    let mut conn = redis::aio::ConnectionManager::new(client)
        .await
        .expect("Redis");
    let keys: Vec<String> = (0..HOT).map(|k| format!("{prefix}raw-{k:032}")).collect();
    for key in &keys {
        let _: () = redis::cmd("SET")
            .arg(key)
            .arg(&b"C0123456789abcdef0123456789abcdef\x01\x00\x031"[..])
            .arg("PX")
            .arg(60_000)
            .query_async(&mut conn)
            .await
            .expect("SET");
    }
    for i in 0..n {
        match kind {
            "redis-replay" => call(&idem, u64::MAX - i % HOT).await,
            "redis-fresh" => call(&idem, i).await,
            _ => {
                let v: Option<Vec<u8>> = redis::cmd("GET")
                    .arg(&keys[(i % HOT) as usize])
                    .query_async(&mut conn)
                    .await
                    .expect("GET");
                assert!(v.is_some());
            }
        }
    }
    redis_keys::unlink_prefixed(&mut conn, &prefix).await;
}

fn main() {
    let mut args = std::env::args().skip(1).filter(|a| !a.starts_with('-'));
    let kind = args.next().unwrap_or_else(|| "memory-fresh".into());
    let n: u64 = args.next().and_then(|n| n.parse().ok()).unwrap_or(10_000);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("tokio runtime");
    runtime.block_on(async {
        match kind.as_str() {
            "memory-fresh" | "memory-replay" => {
                let idem = Idempotency::new(MemoryStore::new());
                for k in 0..WARM.max(HOT) {
                    call(&idem, u64::MAX - k).await;
                }
                let replay = kind.ends_with("replay");
                for i in 0..n {
                    call(&idem, if replay { u64::MAX - i % HOT } else { i }).await;
                }
            }
            "attribute-fresh" | "attribute-replay" => {
                let idem = Idempotency::new(MemoryStore::new());
                for k in 0..WARM.max(HOT) {
                    attributed(&idem, u64::MAX - k).await.expect("idem call");
                }
                let replay = kind.ends_with("replay");
                for i in 0..n {
                    let key = if replay { u64::MAX - i % HOT } else { i };
                    attributed(&idem, key).await.expect("idem call");
                }
            }
            "memory-yield" | "memory-yield-64" => {
                let idem = Idempotency::new(MemoryStore::new());
                let tasks: u64 = if kind.ends_with("64") { 64 } else { 1 };
                let mut running = Vec::new();
                for t in 0..tasks {
                    let idem = idem.clone();
                    running.push(tokio::spawn(async move {
                        for i in (0..n / tasks).map(|i| i * tasks + t) {
                            let out: Result<u64, Error> = idem
                                .call("bench", &i)
                                .run(|| async move {
                                    tokio::task::yield_now().await;
                                    Ok(i)
                                })
                                .await;
                            out.expect("idem call");
                        }
                    }));
                }
                for task in running {
                    task.await.expect("bench task");
                }
            }
            "sqlite-fresh" | "sqlite-replay" => {
                let (store, path) = sqlite_store().await;
                let idem = Idempotency::new(store.clone());
                for k in 0..HOT {
                    call(&idem, u64::MAX - k).await;
                }
                let replay = kind.ends_with("replay");
                for i in 0..n {
                    call(&idem, if replay { u64::MAX - i % HOT } else { i }).await;
                }
                store.close().await;
                remove(&path);
            }
            "raw-sqlite-fresh" | "raw-sqlite-replay" => {
                let (store, path) = sqlite_store().await;
                let pool = raw_pool(&path).await;
                for k in 0..HOT {
                    raw_fresh(&pool, -(k as i64) - 1).await;
                }
                for i in 0..n {
                    if kind.ends_with("replay") {
                        raw_replay(&pool, -((i % HOT) as i64) - 1).await;
                    } else {
                        raw_fresh(&pool, i as i64).await;
                    }
                }
                pool.close().await;
                store.close().await;
                remove(&path);
            }
            "postgres-replay" | "raw-postgres-replay" => postgres(&kind, n).await,
            "redis-replay" | "redis-fresh" | "raw-redis-replay" => redis(&kind, n).await,
            "hand-fresh" | "hand-replay" => {
                let map = Mutex::new(HashMap::new());
                for k in 0..WARM.max(HOT) {
                    hand(&map, u64::MAX - k);
                }
                let replay = kind.ends_with("replay");
                for i in 0..n {
                    hand(&map, if replay { u64::MAX - i % HOT } else { i });
                }
            }
            "encode-u64" => {
                for i in 0..n {
                    std::hint::black_box(idem::admin::encode_record(&i).unwrap());
                }
            }
            "decode-u64" => {
                let bytes = idem::admin::encode_record(&918_273u64).unwrap();
                for _ in 0..n {
                    let v: u64 = idem::admin::decode_record(std::hint::black_box(&bytes)).unwrap();
                    std::hint::black_box(v);
                }
            }
            "key" => {
                for i in 0..n {
                    std::hint::black_box(RecordKey::new("bench", &i));
                }
            }
            other => panic!("unknown kind `{other}`"),
        }
    });
}
