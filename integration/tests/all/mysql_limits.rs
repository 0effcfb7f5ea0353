//! The limits `MySqlStore`'s own connections run under: a statement the
//! caller gave up on is given up by the server too, and a handler's
//! transaction runs free of them and gives them back.
//!
//! Needs a MySQL or MariaDB server: see `support/mysql_server.rs`.

use crate::support::mysql_server;

use std::time::Duration;

use idem::transaction::Transactional;
use idem::{Error, Idempotency, MySqlStore};
use sqlx::Connection;
use sqlx::mysql::MySqlConnection;

/// Statements of the store's connections that touch `table` and still run
/// at the server, seen from `conn` (another session).
async fn running(conn: &mut MySqlConnection, table: &str) -> i64 {
    sqlx::query_scalar(
        "SELECT COUNT(*) FROM information_schema.PROCESSLIST \
         WHERE ID <> CONNECTION_ID() AND COMMAND <> 'Sleep' AND INFO LIKE CONCAT('%', ?, '%')",
    )
    .bind(table)
    .fetch_one(conn)
    .await
    .unwrap()
}

/// A claim behind a row lock another session holds: the caller gets
/// `Error::Store` after the response timeout, and a moment later the server
/// runs nothing of it (on MariaDB `max_statement_time` ended it; on MySQL
/// `innodb_lock_wait_timeout`, a second at least).
async fn a_blocked_claim_is_given_up(idem: &Idempotency, table: &str, key: &str) {
    let url = mysql_server::url().await;
    let first: Result<u8, Error> = idem
        .call("gave-up", key)
        .fingerprint(&1)
        .run(|| async { Ok(1) })
        .await;
    assert_eq!(first.unwrap(), 1);
    let mut holder = MySqlConnection::connect(&url).await.unwrap();
    sqlx::query("BEGIN").execute(&mut holder).await.unwrap();
    let lock = format!("SELECT 1 FROM `{table}` FOR UPDATE");
    sqlx::query(&lock).execute(&mut holder).await.unwrap();
    let blocked: Result<u8, Error> = idem
        .call("gave-up", key)
        .mismatch(idem::Mismatch::Rerun)
        .fingerprint(&2)
        .run(|| async { panic!("ran without a claim") })
        .await;
    assert!(matches!(blocked, Err(Error::Store(_))), "{blocked:?}");
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    let mut checker = MySqlConnection::connect(&url).await.unwrap();
    assert_eq!(
        running(&mut checker, table).await,
        0,
        "the claim still runs at the server"
    );
    sqlx::query("ROLLBACK").execute(&mut holder).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_statement_the_caller_gave_up_on_is_given_up_by_the_server() {
    let table = mysql_server::unique_table("gave_up");
    let store = MySqlStore::builder()
        .table(&table)
        .response_timeout(Duration::from_millis(300))
        .connect(&mysql_server::url().await)
        .await
        .unwrap();
    store.migrate().await.unwrap();
    a_blocked_claim_is_given_up(&Idempotency::new(store), &table, "k").await;
}

/// On one connection: a handler's transaction sees the server's defaults,
/// and after it commits the store's limits hold again on that connection.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_handlers_transaction_runs_free_of_the_limits_and_gives_them_back() {
    let table = mysql_server::unique_table("handler_limits");
    let store = MySqlStore::builder()
        .table(&table)
        .max_connections(1)
        .response_timeout(Duration::from_millis(300))
        .connect(&mysql_server::url().await)
        .await
        .unwrap();
    store.migrate().await.unwrap();
    let begun = store.begin().await.unwrap();
    {
        let mut conn = begun.open().conn().await.unwrap();
        let (lock_wait, global): (u64, u64) = sqlx::query_as(
            "SELECT @@SESSION.innodb_lock_wait_timeout, @@GLOBAL.innodb_lock_wait_timeout",
        )
        .fetch_one(&mut *conn)
        .await
        .unwrap();
        assert_eq!(lock_wait, global, "the handler's lock wait is the server's");
        assert!(
            lock_wait > 1,
            "a server whose default is 1 s proves nothing"
        );
    }
    begun.open().commit().await.unwrap();
    a_blocked_claim_is_given_up(&Idempotency::new(store), &table, "k").await;
}
