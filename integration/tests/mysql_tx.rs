//! The transactional mode of `MySqlStore`: the claim, the body's own
//! writes and the completed record commit or roll back together, also when
//! the worker is SIGKILLed between the effect and the commit.
//!
//! Needs a MySQL or MariaDB server: see `support/mysql_server.rs`.

#[path = "support/mysql_server.rs"]
mod mysql_server;

use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use idem::{Error, Idempotency, MySqlStore};
use serde::{Deserialize, Serialize};
use sqlx::MySqlPool;
use sqlx::mysql::MySqlConnection;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Order {
    id: u64,
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

/// A table of orders and a migrated store beside it.
struct Fixture {
    pool: MySqlPool,
    store: MySqlStore,
    idem: Idempotency,
    orders: String,
    table: String,
}

async fn fixture(test: &str) -> Fixture {
    let table = mysql_server::unique_table(test);
    let pool = MySqlPool::connect(&mysql_server::url().await)
        .await
        .unwrap();
    let store = MySqlStore::builder()
        .table(table.clone())
        .from_pool(pool.clone())
        .unwrap();
    store.migrate().await.unwrap();
    let orders = format!("`{table}_orders`");
    sqlx::raw_sql(&format!(
        "CREATE TABLE {orders} (id BIGINT UNSIGNED AUTO_INCREMENT PRIMARY KEY, order_key VARCHAR(64) NOT NULL, sku VARCHAR(64) NOT NULL) ENGINE = InnoDB"
    ))
    .execute(&pool)
    .await
    .unwrap();
    Fixture {
        idem: Idempotency::new(store.clone()),
        pool,
        store,
        orders,
        table,
    }
}

impl Fixture {
    async fn count(&self, sql: String) -> i64 {
        sqlx::query_scalar(&sql)
            .fetch_one(&self.pool)
            .await
            .unwrap()
    }

    async fn orders(&self) -> i64 {
        self.count(format!("SELECT COUNT(*) FROM {}", self.orders))
            .await
    }

    async fn records(&self) -> i64 {
        self.count(format!("SELECT COUNT(*) FROM {}", self.store.table()))
            .await
    }

    async fn completed(&self) -> i64 {
        self.count(format!(
            "SELECT COUNT(*) FROM {} WHERE record IS NOT NULL",
            self.store.table()
        ))
        .await
    }
}

async fn insert_order(conn: &mut MySqlConnection, orders: &str, key: &str, sku: &str) -> Order {
    let done = sqlx::query(&format!(
        "INSERT INTO {orders} (order_key, sku) VALUES (?, ?)"
    ))
    .bind(key)
    .bind(sku)
    .execute(conn)
    .await
    .unwrap();
    Order {
        id: done.last_insert_id(),
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
            tx.commit().await.unwrap();
            out
        })
    };
    // Not a timing assertion: the holder cannot commit before `go`, so a
    // duplicate that did not wait would have run its body by now or
    // answered InProgress, and either fails the checks below.
    tokio::time::sleep(Duration::from_millis(300)).await;
    go_tx.send(()).unwrap();
    let first = holder.await.unwrap().unwrap();
    let second = duplicate.await.unwrap().unwrap();
    assert_eq!(first, second);
    assert_eq!(runs.load(Ordering::SeqCst), 1);
    assert_eq!(f.orders().await, 1);
}

const CHAOS: &str = "IDEM_MYSQL_TX_CHAOS";
const CHAOS_KEYS: u32 = 200;

/// A worker process places orders 0..200 in order, each in a transaction
/// of the transactional mode, and is SIGKILLed again and again at
/// arbitrary moments (between an effect and its commit among them); a new
/// worker starts over each time, replaying what committed. At the end
/// every order exists exactly once, with its record.
#[tokio::test]
async fn sigkilled_workers_leave_no_duplicate_effects() {
    let f = fixture("tx_chaos").await;
    let mut kills = 0;
    // The workers use this process's server, a private one included.
    let url = mysql_server::url().await;
    for round in 0.. {
        let mut worker = Command::new(std::env::current_exe().unwrap())
            .args(["chaos_worker", "--exact", "--nocapture", "--test-threads=1"])
            .env(CHAOS, &f.table)
            .env("IDEM_TEST_MYSQL_URL", &url)
            .spawn()
            .unwrap();
        if round < 12 {
            // A different moment each round.
            tokio::time::sleep(Duration::from_millis(150 + 37 * round)).await;
            if worker.try_wait().unwrap().is_none() {
                worker.kill().unwrap(); // SIGKILL
                kills += 1;
            }
            worker.wait().unwrap();
        } else {
            assert!(worker.wait().unwrap().success(), "the last worker failed");
            break;
        }
    }
    let per_key: Vec<(String, i64)> = sqlx::query_as(&format!(
        "SELECT order_key, COUNT(*) FROM {} GROUP BY order_key HAVING COUNT(*) > 1",
        f.orders
    ))
    .fetch_all(&f.pool)
    .await
    .unwrap();
    println!("{kills} workers killed");
    assert!(
        kills > 0,
        "no worker was killed: the machine is too fast for this test"
    );
    assert_eq!(per_key, vec![], "duplicate effects");
    assert_eq!(f.orders().await, i64::from(CHAOS_KEYS));
    assert_eq!(f.completed().await, i64::from(CHAOS_KEYS));
}

/// Not a test of its own: the process `sigkilled_workers…` starts (a no-op
/// unless `IDEM_MYSQL_TX_CHAOS` is set).
#[tokio::test]
async fn chaos_worker() {
    let Ok(table) = std::env::var(CHAOS) else {
        return;
    };
    let pool = MySqlPool::connect(&mysql_server::url().await)
        .await
        .unwrap();
    let store = MySqlStore::builder()
        .table(table.clone())
        .from_pool(pool.clone())
        .unwrap();
    let idem = Idempotency::new(store.clone());
    let orders = format!("`{table}_orders`");
    for k in 0..CHAOS_KEYS {
        let key = format!("o-{k}");
        let mut tx = pool.begin().await.unwrap();
        let out: Result<Order, Error> = store
            .in_transaction(
                &mut tx,
                idem.call("orders", &key).lease(Duration::from_secs(600)),
            )
            .run(async |conn| Ok(insert_order(conn, &orders, &key, "sku").await))
            .await;
        out.unwrap();
        tx.commit().await.unwrap();
    }
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
