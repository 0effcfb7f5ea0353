//! The transactional mode of `MySqlStore`: the claim, the body's own
//! writes and the completed record commit or roll back together. The
//! cases it shares with `PostgresStore` are in `support/sql/tx.rs`; here,
//! workers SIGKILLed between the effect and the commit.
//!
//! Needs a MySQL or MariaDB server: see `support/mysql_server.rs`.

use crate::support::mysql_server;
use crate::support::sql;
use crate::support::sql_mysql;
use crate::support::test_name;

use std::process::Command;
use std::time::Duration;

use idem::{Error, Idempotency, MySqlStore};
use sql::tx::{Order, TxServer, fixture};
use sql_mysql::{MySqlServer as My, insert_order};
use sqlx::MySqlPool;

// Each as a test of its own, named after it.
sql::tx_cases!(My);

const CHAOS: &str = "IDEM_MYSQL_TX_CHAOS";
const CHAOS_KEYS: u32 = 200;

/// A worker process places orders 0..200 in order, each in a transaction
/// of the transactional mode, and is SIGKILLed again and again at
/// arbitrary moments (between an effect and its commit among them); a new
/// worker starts over each time, replaying what committed. At the end
/// every order exists exactly once, with its record.
#[tokio::test]
async fn sigkilled_workers_leave_no_duplicate_effects() {
    let f = fixture::<My>("tx_chaos").await;
    let mut kills = 0;
    // The workers use this process's server, a private one included.
    let url = mysql_server::url().await;
    for round in 0.. {
        let mut worker = Command::new(std::env::current_exe().unwrap())
            .args([
                test_name(module_path!(), "chaos_worker").as_str(),
                "--exact",
                "--nocapture",
                "--test-threads=1",
            ])
            .env(CHAOS, &f.place)
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
    let orders = My::orders_table(&table);
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
