//! `#[idempotent(store = tx)]` on a `PostgresStore::tx_handle`: the queue
//! handler's transactional mode. The body's effect and the record commit
//! together, roll back together, and a concurrent duplicate waits for the
//! commit and replays.
//!
//! Needs a PostgreSQL server: see `support/pg_server.rs`.

use crate::support::pg_server;

use std::time::Duration;

use idem::postgres::TxHandle;
use idem::{PostgresStore, idempotent};
use serde::{Deserialize, Serialize};
use sqlx::PgPool;

#[derive(Debug, Serialize, Deserialize)]
struct OrderPlaced {
    order_id: String,
    amount_cents: i64,
}

#[derive(Debug)]
enum BillingError {
    Idem(idem::Error),
    Db(#[allow(dead_code)] sqlx::Error), // shown by Debug in assertion messages
}

impl From<idem::Error> for BillingError {
    fn from(err: idem::Error) -> Self {
        BillingError::Idem(err)
    }
}

struct Fixture {
    pool: PgPool,
    store: PostgresStore,
    schema: String,
}

async fn fixture(test: &str) -> Fixture {
    let url = pg_server::url().await;
    let schema = pg_server::unique_schema(test);
    let pool = PgPool::connect(&url).await.unwrap();
    let store = PostgresStore::builder()
        .schema(schema.clone())
        .from_pool(pool.clone())
        .unwrap();
    store.migrate().await.unwrap();
    sqlx::raw_sql(&format!(
        "CREATE TABLE \"{schema}\".billing_effects (order_id TEXT, amount_cents BIGINT)"
    ))
    .execute(&pool)
    .await
    .unwrap();
    Fixture {
        pool,
        store,
        schema,
    }
}

impl Fixture {
    async fn rows(&self) -> i64 {
        sqlx::query_scalar(&format!(
            "SELECT count(*) FROM \"{}\".billing_effects",
            self.schema
        ))
        .fetch_one(&self.pool)
        .await
        .unwrap()
    }

    async fn drop(self) {
        sqlx::raw_sql(&format!("DROP SCHEMA \"{}\" CASCADE", self.schema))
            .execute(&self.pool)
            .await
            .unwrap();
    }
}

/// The handler: one effect row per order, keyed by the business id.
#[idempotent(key = order.order_id, scope = "billing", fingerprint = order, store = tx, skip(tx, schema, slow))]
async fn bill(
    tx: &TxHandle,
    schema: &str,
    order: &OrderPlaced,
    slow: Duration,
) -> Result<i64, BillingError> {
    sqlx::query(&format!(
        "INSERT INTO \"{schema}\".billing_effects (order_id, amount_cents) VALUES ($1, $2)"
    ))
    .bind(&order.order_id)
    .bind(order.amount_cents)
    .execute(&mut *tx.conn().await)
    .await
    .map_err(BillingError::Db)?;
    tokio::time::sleep(slow).await;
    Ok(order.amount_cents)
}

fn order(id: &str, amount_cents: i64) -> OrderPlaced {
    OrderPlaced {
        order_id: id.into(),
        amount_cents,
    }
}

#[tokio::test]
async fn committed_effect_and_record_replay_without_a_second_effect() {
    let f = fixture("txh_commit").await;
    let o = order("order-1", 1200);
    for _ in 0..3 {
        let tx = f.store.tx_handle(f.pool.begin().await.unwrap());
        let out = bill(&tx, &f.schema, &o, Duration::ZERO).await;
        assert_eq!(out.unwrap(), 1200);
        tx.commit().await.unwrap();
    }
    assert_eq!(f.rows().await, 1);

    // Same id, other payload: the poison case.
    let tx = f.store.tx_handle(f.pool.begin().await.unwrap());
    let out = bill(&tx, &f.schema, &order("order-1", 1), Duration::ZERO).await;
    assert!(
        matches!(
            out,
            Err(BillingError::Idem(idem::Error::FingerprintMismatch { .. }))
        ),
        "{out:?}"
    );
    tx.rollback().await.unwrap();
    assert_eq!(f.rows().await, 1);
    f.drop().await;
}

#[tokio::test]
async fn a_rolled_back_or_dropped_transaction_leaves_neither_effect_nor_claim() {
    let f = fixture("txh_rollback").await;
    let o = order("order-2", 700);
    let tx = f.store.tx_handle(f.pool.begin().await.unwrap());
    bill(&tx, &f.schema, &o, Duration::ZERO).await.unwrap();
    tx.rollback().await.unwrap();
    // As if the worker died before the commit.
    let tx = f.store.tx_handle(f.pool.begin().await.unwrap());
    bill(&tx, &f.schema, &o, Duration::ZERO).await.unwrap();
    drop(tx);
    assert_eq!(f.rows().await, 0);

    // The retry runs at once: no claim to wait out.
    let tx = f.store.tx_handle(f.pool.begin().await.unwrap());
    bill(&tx, &f.schema, &o, Duration::ZERO).await.unwrap();
    tx.commit().await.unwrap();
    assert_eq!(f.rows().await, 1);
    f.drop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_concurrent_duplicate_waits_for_the_commit_and_replays() {
    let f = fixture("txh_race").await;
    let o = order("order-3", 300);
    let first = async {
        let tx = f.store.tx_handle(f.pool.begin().await.unwrap());
        let out = bill(&tx, &f.schema, &o, Duration::from_millis(300)).await;
        tx.commit().await.unwrap();
        out.unwrap()
    };
    let second = async {
        tokio::time::sleep(Duration::from_millis(100)).await;
        let tx = f.store.tx_handle(f.pool.begin().await.unwrap());
        let out = bill(&tx, &f.schema, &o, Duration::ZERO).await;
        tx.commit().await.unwrap();
        out.unwrap()
    };
    assert_eq!(tokio::join!(first, second), (300, 300));
    assert_eq!(f.rows().await, 1);

    // After its commit, the handle's own idempotency is over.
    let tx = f.store.tx_handle(f.pool.begin().await.unwrap());
    let idem = (*tx).clone();
    tx.commit().await.unwrap();
    let late: Result<u8, idem::Error> = idem.call("billing", "late").run(|| async { Ok(1) }).await;
    assert!(matches!(late, Err(idem::Error::Store(_))), "{late:?}");
    f.drop().await;
}
