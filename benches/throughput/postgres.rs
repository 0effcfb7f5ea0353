//! PostgresStore beside the two raw statements every dedupe needs
//! (`INSERT … ON CONFLICT DO NOTHING`, then `UPDATE`) and, for replays, a
//! raw `SELECT` by primary key.
//!
//! idem runs on its own unpinged connections (`PostgresStore::connect`, its
//! recommended set-up: one turn per statement). The raw statements run on a
//! sqlx pool with `test_before_acquire(false)`, the cheapest pool sqlx
//! offers (it still pings each connection when it goes back, after the
//! caller has its answer). `idem on the same pool` is the store built with
//! `from_pool` on that very pool, paying the same pings as the baseline.

use std::sync::Arc;

use idem::{Error, Idempotency, PostgresStore};
use sqlx::PgPool;
use sqlx::postgres::PgPoolOptions;

use crate::harness::{Report, idem_runner, measure, runner};

fn url() -> String {
    std::env::var("IDEM_TEST_DATABASE_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".into())
}

async fn idem_call(idem: &Idempotency, scope: &str, key: u64) {
    let out: Result<u64, Error> = idem.call(scope, &key).run(|| async move { Ok(key) }).await;
    out.unwrap();
}

async fn raw_two(pool: &PgPool, table: &str, key: i64) {
    let inserted = sqlx::query(&format!(
        "INSERT INTO {table} (key, token, expires_at) VALUES ($1, $2, now() + interval '30 seconds') ON CONFLICT DO NOTHING"
    ))
    .bind(key)
    .bind(&[7u8; 16][..])
    .execute(pool)
    .await
    .unwrap();
    if inserted.rows_affected() == 1 {
        sqlx::query(&format!(
            "UPDATE {table} SET record = $2, expires_at = now() + interval '1 day' WHERE key = $1 AND token = $3"
        ))
        .bind(key)
        .bind(&b"\x01\x00\x031"[..])
        .bind(&[7u8; 16][..])
        .execute(pool)
        .await
        .unwrap();
    }
}

async fn raw_select(pool: &PgPool, table: &str, key: i64) {
    let row: Option<(Vec<u8>,)> =
        sqlx::query_as(&format!("SELECT record FROM {table} WHERE key = $1"))
            .bind(key)
            .fetch_optional(pool)
            .await
            .unwrap();
    assert!(row.is_some());
}

pub async fn run(report: &mut Report) {
    let url = url();
    let run_id = format!("{:x}", idem::Token::random().to_u128() as u32);
    let schema = format!("idem_bench_{run_id}");
    let pool = PgPoolOptions::new()
        .max_connections(32)
        .test_before_acquire(false)
        .connect(&url)
        .await
        .expect("PostgreSQL for the bench");
    sqlx::query(&format!("CREATE SCHEMA {schema}"))
        .execute(&pool)
        .await
        .unwrap();
    let raw_table: Arc<str> = Arc::from(format!("{schema}.raw"));
    sqlx::query(&format!(
        "CREATE TABLE {raw_table} (key bigint PRIMARY KEY, token bytea NOT NULL, record bytea, expires_at timestamptz NOT NULL)"
    ))
    .execute(&pool)
    .await
    .unwrap();
    let own = PostgresStore::builder()
        .schema(&schema)
        .max_connections(32)
        .connect(&url)
        .await
        .unwrap();
    own.migrate().await.unwrap();
    let idem = Idempotency::new(own.clone());
    let pooled = Idempotency::new(
        PostgresStore::builder()
            .schema(&schema)
            .from_pool(pool.clone())
            .unwrap(),
    );
    let cached = Idempotency::builder(own).local_cache(10_000).build();
    let scope: Arc<str> = Arc::from("bench");

    for (concurrency, calls) in [(1usize, 400u64), (32, 4_000)] {
        let name = format!("postgres fresh key, concurrency {concurrency}");
        let (pool, table) = (pool.clone(), raw_table.clone());
        report
            .scenario(
                &name,
                vec![
                    (
                        "idem PostgresStore",
                        idem_runner(idem.clone(), scope.clone(), concurrency, calls, |i| i),
                    ),
                    (
                        "raw INSERT ON CONFLICT + UPDATE",
                        runner(move || {
                            let (pool, table) = (pool.clone(), table.clone());
                            measure(concurrency, calls, move |i| {
                                let (pool, table) = (pool.clone(), table.clone());
                                async move { raw_two(&pool, &table, i as i64).await }
                            })
                        }),
                    ),
                    (
                        "idem on the same pool",
                        idem_runner(pooled.clone(), scope.clone(), concurrency, calls, |i| i),
                    ),
                ],
            )
            .await;
    }

    const HOT: u64 = 1_000;
    let replays = [(1usize, 2_000u64), (32, 20_000)];
    let replay_name = |concurrency| format!("postgres replay, concurrency {concurrency}");
    if replays.iter().any(|(c, _)| report.wants(&replay_name(*c))) {
        for k in 0..HOT {
            idem_call(&idem, &scope, u64::MAX - k).await;
            raw_two(&pool, &raw_table, -(k as i64) - 1).await;
        }
    }
    for (concurrency, calls) in replays {
        let name = replay_name(concurrency);
        let (pool, table) = (pool.clone(), raw_table.clone());
        report
            .scenario(
                &name,
                vec![
                    ("idem PostgresStore", idem_runner(idem.clone(), scope.clone(), concurrency, calls, |i| u64::MAX - i % HOT)),
                    ("raw SELECT by key", runner(move || {
                        let (pool, table) = (pool.clone(), table.clone());
                        measure(concurrency, calls, move |i| {
                            let (pool, table) = (pool.clone(), table.clone());
                            async move { raw_select(&pool, &table, -((i % HOT) as i64) - 1).await }
                        })
                    })),
                    ("idem PostgresStore + local cache", idem_runner(cached.clone(), scope.clone(), concurrency, calls, |i| u64::MAX - i % HOT)),
                ],
            )
            .await;
    }

    let _ = sqlx::query(&format!("DROP SCHEMA {schema} CASCADE"))
        .execute(&pool)
        .await;
}
