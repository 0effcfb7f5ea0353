//! The transactional mode of `PostgresStore`: the claim, the body's own
//! writes and the completed record commit or roll back together.
//!
//! Needs a PostgreSQL server: see `support/pg_server.rs`.

#[path = "support/pg_server.rs"]
mod pg_server;

use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use idem::{Error, Idempotency, PostgresStore, StoreError};
use serde::{Deserialize, Serialize};
use sqlx::postgres::{PgConnection, PgPool};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Order {
    id: i64,
    sku: String,
}

#[derive(Debug, PartialEq)]
enum AppError {
    OutOfStock,
    Idem(String),
}

impl From<Error> for AppError {
    fn from(err: Error) -> Self {
        AppError::Idem(err.to_string())
    }
}

/// A schema with an `orders` table and a migrated store beside it.
struct Fixture {
    pool: PgPool,
    store: PostgresStore,
    idem: Idempotency,
    orders: String,
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
    let orders = format!("\"{schema}\".orders");
    sqlx::raw_sql(&format!(
        "CREATE TABLE {orders} (id bigserial PRIMARY KEY, order_key text NOT NULL, sku text NOT NULL)"
    ))
    .execute(&pool)
    .await
    .unwrap();
    Fixture {
        idem: Idempotency::new(store.clone()),
        pool,
        store,
        orders,
        schema,
    }
}

impl Fixture {
    async fn orders(&self) -> i64 {
        sqlx::query_scalar(&format!("SELECT count(*) FROM {}", self.orders))
            .fetch_one(&self.pool)
            .await
            .unwrap()
    }

    async fn records(&self) -> i64 {
        sqlx::query_scalar(&format!("SELECT count(*) FROM {}", self.store.table()))
            .fetch_one(&self.pool)
            .await
            .unwrap()
    }

    async fn completed(&self) -> i64 {
        sqlx::query_scalar(&format!(
            "SELECT count(*) FROM {} WHERE record IS NOT NULL",
            self.store.table()
        ))
        .fetch_one(&self.pool)
        .await
        .unwrap()
    }
}

async fn insert_order(conn: &mut PgConnection, orders: &str, key: &str, sku: &str) -> Order {
    let id: i64 = sqlx::query_scalar(&format!(
        "INSERT INTO {orders} (order_key, sku) VALUES ($1, $2) RETURNING id"
    ))
    .bind(key)
    .bind(sku)
    .fetch_one(conn)
    .await
    .unwrap();
    Order {
        id,
        sku: sku.into(),
    }
}

/// Places an order inside a transaction of its own and commits it when
/// the call succeeds, as an application would.
async fn place(f: &Fixture, key: &str, sku: &str, runs: &AtomicUsize) -> Result<Order, AppError> {
    let mut tx = f.pool.begin().await.unwrap();
    let out = f
        .store
        .in_transaction(&mut tx, f.idem.call("orders", key).fingerprint(&sku))
        .run(async |conn| {
            runs.fetch_add(1, Ordering::SeqCst);
            Ok(insert_order(conn, &f.orders, key, sku).await)
        })
        .await;
    if out.is_ok() {
        tx.commit().await.unwrap();
    }
    out
}

#[tokio::test]
async fn a_failing_body_leaves_no_order_and_no_record_and_the_retry_runs() {
    let f = fixture("tx_fail").await;
    let runs = AtomicUsize::new(0);
    let mut tx = f.pool.begin().await.unwrap();
    let out: Result<Order, AppError> = f
        .store
        .in_transaction(&mut tx, f.idem.call("orders", "o-1"))
        .run(async |conn| {
            runs.fetch_add(1, Ordering::SeqCst);
            insert_order(conn, &f.orders, "o-1", "sku-1").await;
            Err(AppError::OutOfStock)
        })
        .await;
    assert_eq!(out, Err(AppError::OutOfStock));
    tx.rollback().await.unwrap();
    assert_eq!((f.orders().await, f.records().await), (0, 0));

    let order = place(&f, "o-1", "sku-1", &runs).await.unwrap();
    assert_eq!(runs.load(Ordering::SeqCst), 2);
    assert_eq!((f.orders().await, f.completed().await), (1, 1));
    assert_eq!(order.sku, "sku-1");
}

#[tokio::test]
async fn a_transaction_dropped_before_commit_leaves_nothing_and_the_retry_runs_at_once() {
    let f = fixture("tx_drop").await;
    let runs = AtomicUsize::new(0);
    {
        let mut tx = f.pool.begin().await.unwrap();
        let out: Result<Order, AppError> = f
            .store
            .in_transaction(
                &mut tx,
                // A long lease: a retry must not have to wait it out.
                f.idem.call("orders", "o-2").lease(Duration::from_secs(600)),
            )
            .run(async |conn| {
                runs.fetch_add(1, Ordering::SeqCst);
                Ok(insert_order(conn, &f.orders, "o-2", "sku-2").await)
            })
            .await;
        out.unwrap();
        // The process "crashes" here: the transaction is dropped, never
        // committed.
    }
    assert_eq!((f.orders().await, f.records().await), (0, 0));
    let order = place(&f, "o-2", "sku-2", &runs).await.unwrap();
    assert_eq!(runs.load(Ordering::SeqCst), 2);
    assert_eq!(f.orders().await, 1);
    assert_eq!(order.sku, "sku-2");
}

#[tokio::test]
async fn a_committed_call_makes_one_order_and_duplicates_replay() {
    let f = fixture("tx_commit").await;
    let runs = AtomicUsize::new(0);
    let first = place(&f, "o-3", "sku-3", &runs).await.unwrap();
    let again = place(&f, "o-3", "sku-3", &runs).await.unwrap();
    assert_eq!(first, again);
    // Through the plain store as well, and reported as a replay.
    let plain = f
        .idem
        .call("orders", "o-3")
        .fingerprint(&"sku-3")
        .run_reported(|| async { panic!("must replay") })
        .await;
    assert!(plain.replayed);
    assert_eq!(plain.result.map_err(|e: Error| e.to_string()), Ok(first));
    assert_eq!(runs.load(Ordering::SeqCst), 1);
    assert_eq!((f.orders().await, f.completed().await), (1, 1));
    // Another payload under the same key is refused, in the transaction.
    let other = place(&f, "o-3", "sku-9", &runs).await;
    assert!(
        matches!(other, Err(AppError::Idem(ref m)) if m.contains("different payload")),
        "{other:?}"
    );
    assert_eq!(f.orders().await, 1);
}

/// While one transaction holds the claim, a duplicate waits on its row
/// lock; after the commit it replays the committed order.
#[tokio::test]
async fn a_concurrent_duplicate_waits_for_the_commit_then_replays() {
    let f = Arc::new(fixture("tx_concurrent").await);
    let runs = Arc::new(AtomicUsize::new(0));
    let (claimed_tx, claimed_rx) = tokio::sync::oneshot::channel();
    let (go_tx, go_rx) = tokio::sync::oneshot::channel::<()>();
    let holder = {
        let (f, runs) = (f.clone(), runs.clone());
        tokio::spawn(async move {
            let mut tx = f.pool.begin().await.unwrap();
            let out: Result<Order, AppError> = f
                .store
                .in_transaction(&mut tx, f.idem.call("orders", "o-4"))
                .run(async |conn| {
                    runs.fetch_add(1, Ordering::SeqCst);
                    Ok(insert_order(conn, &f.orders, "o-4", "sku-4").await)
                })
                .await;
            claimed_tx.send(()).unwrap();
            go_rx.await.unwrap();
            tx.commit().await.unwrap();
            out
        })
    };
    claimed_rx.await.unwrap();
    let duplicate = {
        let (f, runs) = (f.clone(), runs.clone());
        tokio::spawn(async move { place(&f, "o-4", "sku-4", &runs).await })
    };
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!duplicate.is_finished(), "the duplicate did not wait");
    go_tx.send(()).unwrap();
    let first = holder.await.unwrap().unwrap();
    let second = duplicate.await.unwrap().unwrap();
    assert_eq!(first, second);
    assert_eq!(runs.load(Ordering::SeqCst), 1);
    assert_eq!(f.orders().await, 1);
}

const DIE: &str = "IDEM_PG_TX_DIE";

/// A worker process inserts an order and claims its key inside a
/// transaction, then dies (abort) before the commit. The database rolls
/// both back: no order, no record, and the retry runs at once.
#[tokio::test]
async fn a_process_that_dies_before_commit_leaves_nothing() {
    let f = fixture("tx_die").await;
    let status = Command::new(std::env::current_exe().unwrap())
        .args(["dying_worker", "--exact", "--nocapture", "--test-threads=1"])
        .env(DIE, &f.schema)
        .env("IDEM_TEST_DATABASE_URL", pg_server::url().await)
        .status()
        .unwrap();
    assert!(!status.success(), "the worker was meant to die");
    // The server notices the dead session and rolls back its transaction.
    let mut settled = false;
    for _ in 0..100 {
        let busy: i64 = sqlx::query_scalar(
            "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'idem_dying_worker'",
        )
        .fetch_one(&f.pool)
        .await
        .unwrap();
        if busy == 0 {
            settled = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(settled, "the dead worker's session lingers");
    assert_eq!((f.orders().await, f.records().await), (0, 0));
    let runs = AtomicUsize::new(0);
    let order = tokio::time::timeout(Duration::from_secs(5), place(&f, "o-5", "sku-5", &runs))
        .await
        .expect("the retry waited for a lease")
        .unwrap();
    assert_eq!(runs.load(Ordering::SeqCst), 1);
    assert_eq!(order.sku, "sku-5");
    assert_eq!((f.orders().await, f.completed().await), (1, 1));
}

/// Not a test of its own: the process `a_process_that_dies…` starts (a
/// no-op unless `IDEM_PG_TX_DIE` is set).
#[tokio::test]
async fn dying_worker() {
    let Ok(schema) = std::env::var(DIE) else {
        return;
    };
    let url = pg_server::url().await;
    let options: sqlx::postgres::PgConnectOptions = url.parse().unwrap();
    let pool = sqlx::postgres::PgPoolOptions::new()
        .connect_with(options.application_name("idem_dying_worker"))
        .await
        .unwrap();
    let store = PostgresStore::builder()
        .schema(schema.clone())
        .from_pool(pool.clone())
        .unwrap();
    let idem = Idempotency::new(store.clone());
    let orders = format!("\"{schema}\".orders");
    let mut tx = pool.begin().await.unwrap();
    let out: Result<Order, StoreError> = store
        .in_transaction(
            &mut tx,
            idem.call("orders", "o-5")
                .fingerprint(&"sku-5")
                .lease(Duration::from_secs(600)),
        )
        .run(async |conn| Ok(insert_order(conn, &orders, "o-5", "sku-5").await))
        .await
        .map_err(|err: Error| StoreError::new("test", err));
    out.unwrap();
    // Dies between the effect and the commit.
    std::process::abort();
}

/// A recovery point inside a transactional call is refused: a step saved
/// in the caller's transaction would roll back with it, so it could not
/// outlive the failure it is meant to survive.
#[tokio::test]
async fn a_step_in_a_transactional_call_is_refused() {
    let f = fixture("tx_step").await;
    let mut tx = f.pool.begin().await.unwrap();
    let out: Result<Order, Error> = f
        .store
        .in_transaction(&mut tx, f.idem.call("orders", "o-step"))
        .run(async |conn| {
            let order = insert_order(conn, &f.orders, "o-step", "sku-1").await;
            idem::step("confirm", || async { Ok::<_, Error>(order) }).await
        })
        .await;
    let Err(Error::InvalidStep { reason, .. }) = out else {
        panic!("expected InvalidStep, got {out:?}")
    };
    assert!(reason.contains("transaction"), "{reason}");
    tx.rollback().await.unwrap();
    assert_eq!(f.orders().await, 0);
}

/// On a transaction's handle (`tx_handle`, for `#[idempotent(store = …)]`)
/// a step is refused before its body runs: the store does not record steps.
#[tokio::test]
async fn a_step_on_a_transaction_handle_is_refused_before_it_runs() {
    let f = fixture("tx_handle_step").await;
    let tx = f.store.tx_handle(f.pool.begin().await.unwrap());
    let runs = AtomicUsize::new(0);
    let out: Result<u8, Error> = tx
        .call("orders", "o-handle")
        .run(|| async {
            idem::step("charge", || async {
                runs.fetch_add(1, Ordering::SeqCst);
                Ok::<_, Error>(1u8)
            })
            .await
        })
        .await;
    let Err(Error::InvalidStep { reason, .. }) = out else {
        panic!("expected InvalidStep, got {out:?}")
    };
    assert!(reason.contains("does not record steps"), "{reason}");
    assert_eq!(runs.load(Ordering::SeqCst), 0, "the step's body ran");
}

/// `forget` on a transaction's handle deletes inside the transaction: the
/// record is gone once it commits, and still there if it rolls back.
#[tokio::test]
async fn forget_on_a_transaction_commits_or_rolls_back_with_it() {
    let f = fixture("tx_forget").await;
    let runs = Arc::new(AtomicUsize::new(0));
    let call = || {
        let runs = Arc::clone(&runs);
        f.idem.call("orders", "o-1").run(move || async move {
            runs.fetch_add(1, Ordering::SeqCst);
            Ok::<_, Error>(1u8)
        })
    };
    call().await.unwrap();

    let tx = f.store.tx_handle(f.pool.begin().await.unwrap());
    tx.forget("orders", "o-1").await.unwrap();
    tx.rollback().await.unwrap();
    call().await.unwrap();
    assert_eq!(
        runs.load(Ordering::SeqCst),
        1,
        "rolled back: still replayed"
    );

    let tx = f.store.tx_handle(f.pool.begin().await.unwrap());
    tx.forget("orders", "o-1").await.unwrap();
    tx.commit().await.unwrap();
    call().await.unwrap();
    assert_eq!(runs.load(Ordering::SeqCst), 2, "committed: ran again");
}

/// In the transactional mode, a call that asks for a tombstone leaves one
/// with its committed record: after the TTL the same order is
/// `Error::Expired` (its transaction adds nothing), another one is refused.
#[tokio::test]
async fn a_tombstone_is_kept_in_the_transactional_mode() {
    let f = fixture("tx_tombstone").await;
    let runs = AtomicUsize::new(0);
    let place_late = async |sku: &str| {
        let mut tx = f.pool.begin().await.unwrap();
        let call = f
            .idem
            .call("orders", "o-late")
            .ttl(Duration::from_millis(300))
            .tombstone(Duration::from_secs(60))
            .fingerprint(&sku);
        let out = f
            .store
            .in_transaction(&mut tx, call)
            .run(async |conn| {
                runs.fetch_add(1, Ordering::SeqCst);
                Ok::<_, Error>(insert_order(conn, &f.orders, "o-late", sku).await)
            })
            .await;
        tx.commit().await.unwrap();
        out
    };
    assert_eq!(place_late("tea").await.unwrap().sku, "tea");
    tokio::time::sleep(Duration::from_millis(900)).await;
    assert!(matches!(
        place_late("tea").await,
        Err(Error::Expired { .. })
    ));
    assert!(matches!(
        place_late("coffee").await,
        Err(Error::FingerprintMismatch { .. })
    ));
    assert_eq!((runs.load(Ordering::SeqCst), f.orders().await), (1, 1));
}
