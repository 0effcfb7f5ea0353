//! SqliteStore beside the raw statements on the same file: `INSERT … ON
//! CONFLICT DO NOTHING` then `UPDATE` for a fresh key, a `SELECT` by
//! primary key for a replay.
//!
//! Both sides open the file the way `SqliteStore::open` does (WAL,
//! `synchronous = FULL`, at most 4 connections reused without a ping, the
//! one used last first), so each commit waits for its fsync on both. A SqliteStore claim on an absent key is a read,
//! then a conditional insert (SQLite has no `INSERT … RETURNING` of the
//! row that blocked it): three statements per fresh call against the
//! baseline's two.

use std::sync::Arc;
use std::time::Duration;

use idem::{Error, Idempotency, SqliteStore};
use sqlx::SqliteConnection;
use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqliteSynchronous};

use crate::harness::{Report, idem_runner, measure, runner};

type Dedicated = crate::dedicated::Dedicated<SqliteConnection>;

const HOT: u64 = 1_000;

async fn idem_call(idem: &Idempotency, scope: &str, key: u64) {
    let out: Result<u64, Error> = idem.call(scope, &key).run(|| async move { Ok(key) }).await;
    out.unwrap();
}

async fn raw_two(raw: &Dedicated, key: i64) {
    raw.with(async |conn| raw_two_on(conn, key).await).await
}

async fn raw_two_on(conn: &mut SqliteConnection, key: i64) {
    let inserted = sqlx::query(
        "INSERT INTO raw_records (key, token, expires_at) VALUES (?1, ?2, CAST((julianday('now') - 2440587.5) * 86400000.0 AS INTEGER) + 30000) ON CONFLICT DO NOTHING",
    )
    .bind(key)
    .bind(&[7u8; 16][..])
    .execute(&mut *conn)
    .await
    .unwrap();
    if inserted.rows_affected() == 1 {
        sqlx::query(
            "UPDATE raw_records SET record = ?2, expires_at = CAST((julianday('now') - 2440587.5) * 86400000.0 AS INTEGER) + 86400000 WHERE key = ?1 AND token = ?3",
        )
        .bind(key)
        .bind(&b"\x01\x00\x031"[..])
        .bind(&[7u8; 16][..])
        .execute(&mut *conn)
        .await
        .unwrap();
    }
}

async fn raw_select(raw: &Dedicated, key: i64) {
    let row: Option<(Vec<u8>,)> = raw
        .with(async |conn| {
            sqlx::query_as("SELECT record FROM raw_records WHERE key = ?1")
                .bind(key)
                .fetch_optional(conn)
                .await
        })
        .await
        .unwrap();
    assert!(row.is_some());
}

/// Removes the database file and its WAL and shared-memory files.
fn remove(path: &std::path::Path) {
    for suffix in ["", "-wal", "-shm"] {
        let mut name = path.as_os_str().to_owned();
        name.push(suffix);
        let _ = std::fs::remove_file(name);
    }
}

pub(crate) async fn run(report: &mut Report) {
    let run_id = format!("{:x}", idem::store::Token::random().to_u128() as u32);
    let path = std::env::temp_dir().join(format!("idem-bench-{run_id}.db"));
    let store = SqliteStore::open(&path).await.expect("SQLite file");
    let options = SqliteConnectOptions::new()
        .filename(&path)
        .journal_mode(SqliteJournalMode::Wal)
        .synchronous(SqliteSynchronous::Full)
        .busy_timeout(Duration::from_secs(10));
    let raw = Arc::new(Dedicated::new(options, 4));
    raw.with(async |conn| {
        sqlx::query(
            "CREATE TABLE raw_records (key INTEGER PRIMARY KEY, token BLOB NOT NULL, record BLOB, expires_at INTEGER NOT NULL)",
        )
        .execute(conn)
        .await
    })
    .await
    .unwrap();
    let idem = Idempotency::new(store.clone());
    let scope: Arc<str> = Arc::from("bench");

    for (concurrency, calls) in [(1usize, 200u64), (4, 400)] {
        let name = format!("sqlite fresh key, concurrency {concurrency}");
        let raw = raw.clone();
        report
            .scenario(
                &name,
                vec![
                    (
                        "idem SqliteStore",
                        idem_runner(idem.clone(), scope.clone(), concurrency, calls, |i| i),
                    ),
                    (
                        "raw INSERT ON CONFLICT + UPDATE",
                        runner(move || {
                            let raw = raw.clone();
                            measure(concurrency, calls, move |i| {
                                let raw = raw.clone();
                                async move { raw_two(&raw, i as i64).await }
                            })
                        }),
                    ),
                ],
            )
            .await;
    }

    let replays = [(1usize, 4_000u64), (4, 8_000)];
    let replay_name = |concurrency| format!("sqlite replay, concurrency {concurrency}");
    if replays.iter().any(|(c, _)| report.wants(&replay_name(*c))) {
        for k in 0..HOT {
            idem_call(&idem, &scope, u64::MAX - k).await;
            raw_two(&raw, -(k as i64) - 1).await;
        }
    }
    for (concurrency, calls) in replays {
        let name = replay_name(concurrency);
        let raw = raw.clone();
        report
            .scenario(
                &name,
                vec![
                    (
                        "idem SqliteStore",
                        idem_runner(idem.clone(), scope.clone(), concurrency, calls, |i| {
                            u64::MAX - i % HOT
                        }),
                    ),
                    (
                        "raw SELECT by key",
                        runner(move || {
                            let raw = raw.clone();
                            measure(concurrency, calls, move |i| {
                                let raw = raw.clone();
                                async move { raw_select(&raw, -((i % HOT) as i64) - 1).await }
                            })
                        }),
                    ),
                ],
            )
            .await;
    }

    store.close().await;
    drop(raw);
    remove(&path);
}
