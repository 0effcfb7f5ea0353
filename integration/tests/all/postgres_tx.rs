//! The transactional mode of `PostgresStore`: the claim, the body's own
//! writes and the completed record commit or roll back together. The
//! cases it shares with `MySqlStore` are in `support/sql/tx.rs`; here,
//! a process that dies before its commit, and a step in a transactional
//! call.
//!
//! Needs a PostgreSQL server: see `support/pg_server.rs`.

use crate::support::pg_server;
use crate::support::sql;
use crate::support::sql_pg;
use crate::support::test_name;

use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use idem::{Error, Idempotency, PostgresStore, StoreError};
use sql::tx::{Order, TxServer, fixture};
use sql_pg::{Pg, insert_order};

// Each as a test of its own, named after it.
sql::tx_cases!(Pg);

const DIE: &str = "IDEM_PG_TX_DIE";

/// A worker process inserts an order and claims its key inside a
/// transaction, then dies (abort) before the commit. The database rolls
/// both back: no order, no record, and the retry runs at once.
#[tokio::test]
async fn a_process_that_dies_before_commit_leaves_nothing() {
    let f = fixture::<Pg>("tx_die").await;
    let status = Command::new(std::env::current_exe().unwrap())
        .args([
            test_name(module_path!(), "dying_worker").as_str(),
            "--exact",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(DIE, &f.place)
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
    let order = tokio::time::timeout(Duration::from_secs(5), f.place("o-5", "sku-5", &runs))
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
    let orders = Pg::orders_table(&schema);
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
    let f = fixture::<Pg>("tx_step").await;
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

/// A reconcile set on a transactional call: the transaction's claim takes
/// over a holder that vanished outside it, the reconcile answers, and its
/// value commits as the record while the body does not run.
#[tokio::test]
async fn a_reconcile_answers_a_takeover_inside_a_transaction() {
    use idem::Store;
    use idem::fingerprint::Fingerprint;
    use idem::key::RecordKey;

    let f = fixture::<Pg>("tx_reconcile").await;
    let lease = Duration::from_millis(200);
    let claim = idem_conformance::new_claim(Fingerprint::NONE, lease);
    let won = f
        .store
        .claim(&RecordKey::new("orders", "o-lost"), &claim)
        .await
        .unwrap();
    assert!(matches!(won, idem::store::ClaimOutcome::Won { .. }));
    tokio::time::sleep(lease * 2).await;
    let mut tx = f.pool.begin().await.unwrap();
    let out: Result<Order, Error> = f
        .store
        .in_transaction(
            &mut tx,
            f.idem.call("orders", "o-lost").reconcile(|| async {
                Ok(Some(Order {
                    id: 7,
                    sku: "sku-reconciled".into(),
                }))
            }),
        )
        .run(async |conn| Ok(insert_order(conn, &f.orders, "o-lost", "sku-1").await))
        .await;
    assert_eq!(out.unwrap().sku, "sku-reconciled");
    tx.commit().await.unwrap();
    assert_eq!((f.orders().await, f.completed().await), (0, 1));
}
