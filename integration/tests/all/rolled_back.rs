//! A statement the database rolls back (a deadlock, a serialization
//! failure: a purge's batch meeting a completion) took no effect, and is
//! sent again (issue 50): a completion whose body ran does not fail for
//! it, and the body never runs twice. Each case injects the rollback with
//! a trigger on the records table of a schema or table of its own, which
//! fails the first updates (a sequence, which no rollback undoes, counts
//! them); the store's other statements pass untouched.

use std::time::Duration;

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

use idem::{Error, Idempotency, MySqlStore, PostgresStore};

use crate::support::{mysql_server, pg_server};

/// Runs one call and its duplicate on `idem`: the body runs once, the
/// call answers its value, the duplicate replays it.
async fn completes_once(idem: &Idempotency) -> Result<(), Error> {
    let runs = Arc::new(AtomicU32::new(0));
    for _ in 0..2 {
        let runs = Arc::clone(&runs);
        let out: u32 = idem
            .call("orders", "o-1")
            .run(|| async move { Ok::<_, Error>(runs.fetch_add(1, Ordering::SeqCst) + 7) })
            .await?;
        assert_eq!(out, 7);
    }
    assert_eq!(runs.load(Ordering::SeqCst), 1, "the body's runs");
    Ok(())
}

/// A PostgreSQL store whose first `fails` updates of a record are rolled
/// back: the first as a deadlock (40P01), the rest as serialization
/// failures (40001).
async fn postgres(fails: u32) -> (Idempotency, sqlx::PgPool, String) {
    let url = pg_server::url().await;
    let schema = pg_server::unique_schema("rolled_back");
    let store = PostgresStore::builder()
        .schema(schema.clone())
        .connect(&url)
        .await
        .unwrap();
    store.migrate().await.unwrap();
    let db = sqlx::PgPool::connect(&url).await.unwrap();
    let s = format!("\"{schema}\"");
    sqlx::raw_sql(&format!(
        "CREATE SEQUENCE {s}.updates;
         CREATE FUNCTION {s}.roll_back() RETURNS trigger LANGUAGE plpgsql AS $$
         DECLARE n bigint := nextval('{s}.updates');
         BEGIN
           IF n <= {fails} THEN
             RAISE EXCEPTION 'injected rollback %', n
               USING ERRCODE = CASE WHEN n = 1 THEN '40P01' ELSE '40001' END;
           END IF;
           RETURN NEW;
         END $$;
         CREATE TRIGGER roll_back BEFORE UPDATE ON {s}.idem_records
           FOR EACH ROW EXECUTE FUNCTION {s}.roll_back();"
    ))
    .execute(&db)
    .await
    .unwrap();
    (Idempotency::new(store), db, s)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_a_completion_rolled_back_is_sent_again() {
    let (idem, db, s) = postgres(2).await;
    completes_once(&idem).await.unwrap();
    let updates: i64 = sqlx::query_scalar(&format!("SELECT last_value FROM {s}.updates"))
        .fetch_one(&db)
        .await
        .unwrap();
    assert_eq!(updates, 3, "two rolled back, the third landed");
}

/// A statement rolled back every time is sent a bounded number of times
/// by the store (once and again three times), the completion again by the
/// runtime while the claim's lease lasts, then the call fails as a store
/// error (the claim ends with its lease).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_a_statement_rolled_back_every_time_fails_as_a_store_error() {
    let (idem, db, s) = postgres(1_000).await;
    let out: Result<u8, Error> = idem
        .call("orders", "o-2")
        .lease(Duration::from_secs(1))
        .run(|| async { Ok(1) })
        .await;
    assert!(matches!(out, Err(Error::Store(_))), "{out:?}");
    let updates: i64 = sqlx::query_scalar(&format!("SELECT last_value FROM {s}.updates"))
        .fetch_one(&db)
        .await
        .unwrap();
    assert!(
        updates > 4 && updates % 4 == 0,
        "each sending of the completion is sent once and again three times: {updates}"
    );
}

/// MySQL/MariaDB: the first update fails as a deadlock (1213), the
/// second as a lock wait timeout (1205).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mysql_a_completion_rolled_back_is_sent_again() {
    let url = mysql_server::url().await;
    let table = mysql_server::unique_table("rolled_back");
    let store = MySqlStore::builder()
        .table(table.clone())
        .connect(&url)
        .await
        .unwrap();
    store.migrate().await.unwrap();
    let db = sqlx::MySqlPool::connect(&url).await.unwrap();
    let seq = format!("`{table}_updates`");
    sqlx::raw_sql(&format!(
        "CREATE SEQUENCE {seq};
         CREATE TRIGGER `{table}_roll_back` BEFORE UPDATE ON `{table}` FOR EACH ROW
         BEGIN
           DECLARE n BIGINT DEFAULT NEXTVAL({seq});
           IF n = 1 THEN
             SIGNAL SQLSTATE '40001' SET MYSQL_ERRNO = 1213, MESSAGE_TEXT = 'injected deadlock';
           ELSEIF n = 2 THEN
             SIGNAL SQLSTATE 'HY000' SET MYSQL_ERRNO = 1205, MESSAGE_TEXT = 'injected lock wait timeout';
           END IF;
         END"
    ))
    .execute(&db)
    .await
    .unwrap();
    completes_once(&Idempotency::new(store)).await.unwrap();
    let next: i64 = sqlx::query_scalar(&format!("SELECT NEXTVAL({seq})"))
        .fetch_one(&db)
        .await
        .unwrap();
    assert_eq!(next, 4, "two rolled back, the third landed");
}
