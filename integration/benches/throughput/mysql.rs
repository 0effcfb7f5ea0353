//! MySqlStore beside the least a fenced dedupe sends (`INSERT … ON
//! DUPLICATE KEY UPDATE` taking the row only where it expired, then
//! `UPDATE … WHERE key = ? AND token = ?`) and, for replays, a raw `SELECT
//! … WHERE key = ? AND expires_at > now`, on a table shaped like idem's,
//! in the MariaDB or MySQL the tests use (`IDEM_TEST_MYSQL_URL`, else
//! root@127.0.0.1:3306/test). Replays come two ways: hot keys (1,000 keys,
//! the store answering from its table of keys it saw completed) and
//! spread keys ([`crate::spread`]: each key replayed once by a store that
//! did not complete it).
//!
//! As for PostgreSQL: `idem MySqlStore` keeps dedicated connections and
//! reuses them without a ping, and so does `raw …, dedicated connections`;
//! `raw …, sqlx pool` runs the same statements on a `MySqlPool` with
//! `test_before_acquire(false)` (it still pings each connection when it
//! goes back), and `idem from_pool` is the store on that very pool.
//!
//! Where the server keeps `performance_schema` (a private one started with
//! `--performance-schema=ON`), each scenario notes the server's time per
//! call of each subject by kind of statement ([`crate::server_time`],
//! `events.rs`): a `CALL`'s execution, the statements of the procedure
//! inside it, a raw `SELECT`'s execution.

use std::sync::Arc;

use idem::{Error, Idempotency, MySqlStore};
use sqlx::mysql::{MySqlConnection, MySqlPoolOptions};
use sqlx::{MySqlPool, Row};

use crate::dedicated::raw_key;
use crate::harness::{Report, Runner, idem_runner, measure, runner};

mod events;
use crate::server_time::{ServerTime, on_server, subject};
use crate::spread::timed_runner_of;
use events::StatementEvents;

type Time = std::sync::Arc<ServerTime<StatementEvents>>;

type Dedicated = crate::dedicated::Dedicated<MySqlConnection>;

/// Connections per subject (32 callers share them at concurrency 32).
const CONNECTIONS: u32 = 20;
const HOT: u64 = 1_000;

fn url() -> String {
    std::env::var("IDEM_TEST_MYSQL_URL")
        .unwrap_or_else(|_| "mysql://root@127.0.0.1:3306/test".into())
}

/// Where the raw statements run, and the statements, rendered once.
struct Raw {
    dedicated: Option<Dedicated>,
    pool: MySqlPool,
    insert: String,
    update: String,
    select: String,
}

impl Raw {
    async fn execute(&self, statement: &str, binds: &[&[u8]]) -> u64 {
        let mut query = sqlx::query(statement);
        for bind in binds {
            query = query.bind(*bind);
        }
        match &self.dedicated {
            Some(conns) => {
                conns
                    .with(async |conn| query.execute(conn).await.unwrap().rows_affected())
                    .await
            }
            None => query.execute(&self.pool).await.unwrap().rows_affected(),
        }
    }

    async fn two(&self, key: i64) {
        let key = &raw_key(key)[..];
        let token = &[7u8; 16][..];
        // 1 inserted, 2 taken over (1 also for a row left as it was,
        // under sqlx's `CLIENT_FOUND_ROWS`): the keys here are fresh.
        let inserted = self.execute(&self.insert, &[key, token, &[9u8; 32]]).await;
        if inserted >= 1 {
            let record = &b"\x01\x00\x031"[..];
            let updated = self.execute(&self.update, &[record, key, token]).await;
            assert_eq!(updated, 1);
        }
    }

    async fn select(&self, key: i64) {
        let key = raw_key(key);
        let query = sqlx::query(&self.select).bind(&key[..]);
        let row = match &self.dedicated {
            Some(conns) => {
                conns
                    .with(async |conn| query.fetch_optional(conn).await.unwrap())
                    .await
            }
            None => query.fetch_optional(&self.pool).await.unwrap(),
        };
        let record: Vec<u8> = row.expect("a stored row").get(0);
        std::hint::black_box(record);
    }
}

fn raw_runner(raw: &Arc<Raw>, concurrency: usize, calls: u64, replay: bool) -> Runner {
    let raw = raw.clone();
    runner(move || {
        let raw = raw.clone();
        measure(concurrency, calls, move |i| {
            let raw = raw.clone();
            async move {
                if replay {
                    raw.select(-((i % HOT) as i64) - 1).await;
                } else {
                    raw.two(i as i64).await;
                }
            }
        })
    })
}

/// The raw table, shaped like idem's (32-byte key, token, fingerprint,
/// `DATETIME(6)` expiry with an index), so the ratios show what idem's
/// protocol costs, not its record layout; and its two connection kinds.
async fn raw_subjects(url: &str, pool: &MySqlPool, table: &str) -> (Arc<Raw>, Arc<Raw>) {
    sqlx::raw_sql(&format!(
        "CREATE TABLE {table} (`key` BINARY(32) NOT NULL PRIMARY KEY, token BINARY(16) NOT NULL, \
         fingerprint BINARY(32) NOT NULL, record LONGBLOB NULL, expires_at DATETIME(6) NOT NULL, \
         INDEX (expires_at)) ENGINE = InnoDB"
    ))
    .execute(pool)
    .await
    .unwrap();
    let raw = |dedicated| Raw {
        dedicated,
        pool: pool.clone(),
        // Assignments run left to right: `expires_at` last, so the others
        // test the row's old expiry.
        insert: format!(
            "INSERT INTO {table} (`key`, token, fingerprint, expires_at) \
             VALUES (?, ?, ?, UTC_TIMESTAMP(6) + INTERVAL 30 SECOND) ON DUPLICATE KEY UPDATE \
             token = IF(expires_at < UTC_TIMESTAMP(6), VALUES(token), token), \
             fingerprint = IF(expires_at < UTC_TIMESTAMP(6), VALUES(fingerprint), fingerprint), \
             record = IF(expires_at < UTC_TIMESTAMP(6), NULL, record), \
             expires_at = IF(expires_at < UTC_TIMESTAMP(6), VALUES(expires_at), expires_at)"
        ),
        update: format!(
            "UPDATE {table} SET record = ?, expires_at = UTC_TIMESTAMP(6) + INTERVAL 1 DAY \
             WHERE `key` = ? AND token = ?"
        ),
        select: format!(
            "SELECT record FROM {table} WHERE `key` = ? AND expires_at > UTC_TIMESTAMP(6)"
        ),
    };
    let options = url.parse().unwrap();
    let dedicated = Dedicated::new(options, CONNECTIONS as usize);
    (Arc::new(raw(Some(dedicated))), Arc::new(raw(None)))
}

/// Runs `subjects` as `name`, each subject's rounds timed on the server
/// (where it keeps statement events) and noted.
async fn scenario(
    report: &mut Report,
    time: Option<&Time>,
    calls: u64,
    name: &str,
    subjects: Vec<(&'static str, Runner)>,
) {
    let Some(time) = time else {
        return report.scenario(name, subjects).await;
    };
    report
        .scenario(name, on_server(time, calls, subjects))
        .await;
    time.report_to(report, name);
}

pub(crate) async fn run(report: &mut Report) {
    let url = url();
    let run_id = format!("{:x}", idem::store::Token::random().to_u128() as u32);
    let (raw_table, idem_table) = (
        format!("idem_bench_{run_id}_raw"),
        format!("idem_bench_{run_id}"),
    );
    let pool = MySqlPoolOptions::new()
        .max_connections(CONNECTIONS)
        .test_before_acquire(false)
        .connect(&url)
        .await
        .expect("MySQL or MariaDB for the bench");
    let (dedicated, pooled_raw) = raw_subjects(&url, &pool, &raw_table).await;
    let store = MySqlStore::builder()
        .table(&idem_table)
        .max_connections(CONNECTIONS)
        .connect(&url)
        .await
        .unwrap();
    store.migrate().await.unwrap();
    let idem = Idempotency::new(store.clone());
    let pooled = Idempotency::new(
        MySqlStore::builder()
            .table(&idem_table)
            .from_pool(pool.clone())
            .unwrap(),
    );
    let scope: Arc<str> = Arc::from("bench");
    let kept = StatementEvents::kept(&pool).await;
    let time = ServerTime::new(StatementEvents(pool.clone()));

    for (concurrency, calls) in [(1usize, 300u64), (32, 3_200)] {
        let subjects = vec![
            (
                "idem MySqlStore",
                idem_runner(idem.clone(), scope.clone(), concurrency, calls, |i| i),
            ),
            (
                "fenced minimum (upsert WHERE expired + UPDATE WHERE token), dedicated connections",
                raw_runner(&dedicated, concurrency, calls, false),
            ),
            (
                "fenced minimum, sqlx pool",
                raw_runner(&pooled_raw, concurrency, calls, false),
            ),
            (
                "idem from_pool on that sqlx pool",
                idem_runner(pooled.clone(), scope.clone(), concurrency, calls, |i| i),
            ),
        ];
        let name = format!("mysql fresh key, concurrency {concurrency}");
        scenario(report, kept.then_some(&time), calls, &name, subjects).await;
    }

    let replays = [(1usize, 2_000u64), (32, 20_000)];
    let replay_name = |concurrency| format!("mysql replay (hot keys), concurrency {concurrency}");
    if replays.iter().any(|(c, _)| report.wants(&replay_name(*c))) {
        for k in 0..HOT {
            let key = u64::MAX - k;
            let out: Result<u64, Error> = idem
                .call(&*scope, &key)
                .run(|| async move { Ok(key) })
                .await;
            out.unwrap();
            dedicated.two(-(k as i64) - 1).await;
        }
    }
    for (concurrency, calls) in replays {
        let hot = |i| u64::MAX - i % HOT;
        let subjects = vec![
            (
                "idem MySqlStore",
                idem_runner(idem.clone(), scope.clone(), concurrency, calls, hot),
            ),
            (
                "raw SELECT by key, dedicated connections",
                raw_runner(&dedicated, concurrency, calls, true),
            ),
            (
                "raw SELECT by key, sqlx pool",
                raw_runner(&pooled_raw, concurrency, calls, true),
            ),
            (
                "idem from_pool on that sqlx pool",
                idem_runner(pooled.clone(), scope.clone(), concurrency, calls, hot),
            ),
        ];
        let name = replay_name(concurrency);
        scenario(report, kept.then_some(&time), calls, &name, subjects).await;
    }

    // Each key's first call goes to a store of its own, so the store that
    // replays it never saw it completed.
    let first = Idempotency::new(
        MySqlStore::builder()
            .table(&idem_table)
            .max_connections(CONNECTIONS / 2)
            .connect(&url)
            .await
            .unwrap(),
    );
    for (concurrency, calls) in [(1usize, 320u64), (32, 3_200)] {
        let call = |idem: &Idempotency| {
            let (idem, scope) = (idem.clone(), scope.clone());
            move |key: u64| {
                let (idem, scope) = (idem.clone(), scope.clone());
                async move {
                    let out: Result<u64, Error> = idem
                        .call(&*scope, &key)
                        .run(|| async move { Ok(key) })
                        .await;
                    out.unwrap();
                }
            }
        };
        let raw = |replay: bool| {
            let raw = dedicated.clone();
            move |k: u64| {
                let raw = raw.clone();
                async move {
                    match replay {
                        true => raw.select(k as i64).await,
                        false => raw.two(k as i64).await,
                    }
                }
            }
        };
        let subjects = vec![
            subject("idem MySqlStore", |name| {
                timed_runner_of((&time, name), concurrency, calls, call(&first), call(&idem))
            }),
            subject("raw SELECT by key, dedicated connections", |name| {
                timed_runner_of((&time, name), concurrency, calls, raw(false), raw(true))
            }),
        ];
        let name = format!("mysql replay (spread keys), concurrency {concurrency}");
        // The replays are timed inside each round, without the first calls.
        report.scenario(&name, subjects).await;
        if kept {
            time.report_to(report, &name);
        }
    }

    let drop_raw = format!("DROP TABLE IF EXISTS `{raw_table}`");
    sqlx::raw_sql(&drop_raw).execute(&pool).await.unwrap();
    crate::mysql_tables::drop_store_table(&pool, &idem_table).await;
}
