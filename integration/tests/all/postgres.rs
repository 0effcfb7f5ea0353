//! The conformance suite on `PostgresStore`, the SQL cases it shares with
//! `MySqlStore` (`support/sql/`), and what is particular to it: schemas,
//! a server stopped, frozen, read-only or stalled, sessions terminated,
//! a claim that waited on a writer's lock.
//!
//! Needs a PostgreSQL server: see `support/pg_server.rs`.

use crate::support::pg_server;
use crate::support::sql;
use crate::support::sql_pg;

use std::time::{Duration, Instant};

use idem::key::RecordKey;
use idem::store::{Claim, ClaimOutcome, Token};
use idem::{Error, Idempotency, PostgresStore, Store};
use sql::{admin as cases, faults};
use sql_pg::{Pg, admin};
use sqlx::Connection;

idem_conformance::suite!(async { Idempotency::new(sql::store::<Pg>("conf").await) });

// Each as a test of its own, named after it.
sql::store_cases!(Pg, unknown_version = 5);

fn claim(lease: Duration) -> Claim {
    sql::claim::<Pg>(lease)
}

#[tokio::test]
async fn migrate_twice_and_concurrently_is_harmless() {
    let (url, schema) = (pg_server::url().await, pg_server::unique_schema("migrate"));
    let replica = async || {
        let builder = PostgresStore::builder().schema(&schema);
        builder.table("records").connect(&url).await
    };
    let table = format!("\"{schema}\".\"records\"");
    cases::migrate_twice_and_concurrently_is_harmless::<Pg>(replica, &table).await;
}

#[tokio::test]
async fn custom_schema_and_table() {
    let url = pg_server::url().await;
    let schema = pg_server::unique_schema("names");
    let named = |table| {
        let builder = PostgresStore::builder().schema(&schema);
        builder.table(table).connect(&url)
    };
    let a = named("payments_idem").await.unwrap();
    let b = named("orders_idem").await.unwrap();
    assert_eq!(a.table(), format!("\"{schema}\".\"payments_idem\""));
    cases::two_tables_are_two_records::<Pg>(&a, &b).await;
    cases::bad_table_names_are_refused::<Pg>(&["x\"; DROP TABLE y; --", "", "1abc", "a b"]).await;
}

/// The server goes away and comes back: calls fail with `Error::Store`
/// and run no body meanwhile, and the same store works again afterwards.
#[tokio::test]
async fn connection_loss_is_a_store_error_and_recovers_without_restart() {
    let server = pg_server::PrivateServer::start();
    let store = PostgresStore::builder()
        .acquire_timeout(Duration::from_secs(2))
        .connect(&server.url())
        .await
        .unwrap();
    store.migrate().await.unwrap();
    let idem = Idempotency::new(store);
    let (down, up) = (async || server.stop(), async || server.restart());
    faults::an_outage_fails_closed_and_recovers(&idem, down, up).await;
}

/// The store's sessions are terminated by the server while idle: the next
/// steps find out, open new connections and succeed.
#[tokio::test]
async fn terminated_sessions_are_replaced_transparently() {
    let app = format!("idem_terminate_{:x}", Token::random().to_u128() as u32);
    let options = sql::options::<Pg>().await.application_name(&app);
    let store = PostgresStore::builder()
        .schema(pg_server::unique_schema("terminate"))
        .connect_with(options)
        .await
        .unwrap();
    store.migrate().await.unwrap();
    let terminate = async || {
        let killed: Vec<bool> = sqlx::query_scalar(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = $1",
        )
        .bind(&app)
        .fetch_all(&mut admin().await)
        .await
        .unwrap();
        assert!(!killed.is_empty() && killed.iter().all(|k| *k));
    };
    faults::cut_sessions_are_replaced_transparently(&Idempotency::new(store), terminate).await;
}

/// A server that refuses writes (here a session forced read-only, as on a
/// hot standby or a database switched to read-only): duplicates of
/// completed calls are still replayed, and a new key fails closed.
#[tokio::test]
async fn a_read_only_server_still_replays_completed_records() {
    let url = pg_server::url().await;
    let schema = pg_server::unique_schema("readonly");
    let writer = PostgresStore::builder()
        .schema(&schema)
        .connect(&url)
        .await
        .expect("connect");
    writer.migrate().await.expect("migrate");
    let first: Result<String, Error> = Idempotency::new(writer)
        .call("ro", "done")
        .run(|| async { Ok("receipt".to_owned()) })
        .await;
    assert_eq!(first.unwrap(), "receipt");

    let options: sqlx::postgres::PgConnectOptions = url.parse().unwrap();
    let read_only = PostgresStore::builder()
        .schema(&schema)
        .connect_with(options.options([("default_transaction_read_only", "on")]))
        .await
        .expect("connect read-only");
    let idem = Idempotency::new(read_only);
    let replay: Result<String, Error> = idem
        .call("ro", "done")
        .run(|| async { panic!("a duplicate ran") })
        .await;
    assert_eq!(replay.unwrap(), "receipt");
    let fresh: Result<String, Error> = idem
        .call("ro", "new")
        .run(|| async { panic!("ran without a claim") })
        .await;
    let Err(Error::Store(err)) = fresh else {
        panic!("{fresh:?}")
    };
    assert!(err.to_string().contains("read-only"), "{err}");
}

/// A server that stops answering (its answers held back by a proxy, as a
/// SIGSTOPped server would): callers fail within the response timeout with
/// an error naming it, instead of hanging as long as the stall; once the
/// server answers again, calls succeed on the same store.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stalled_server_fails_callers_within_the_response_timeout() {
    let (proxy, via) = sql::turns::proxy::<Pg>().await;
    let store = PostgresStore::builder()
        .schema(pg_server::unique_schema("stall"))
        .response_timeout(Duration::from_millis(500))
        .connect_with(via)
        .await
        .unwrap();
    store.migrate().await.unwrap();
    let idem = Idempotency::new(store);

    proxy.stall(true);
    let started = Instant::now();
    let stalled: Result<u8, Error> = idem
        .call("stall", "k1")
        .run(|| async { panic!("ran without a claim") })
        .await;
    let waited = started.elapsed();
    let Err(Error::Store(err)) = stalled else {
        panic!("{stalled:?}")
    };
    assert!(err.to_string().contains("response_timeout"), "{err}");
    assert!(waited < Duration::from_secs(2), "waited {waited:?}");

    proxy.stall(false);
    let after: Result<u8, Error> = idem.call("stall", "k2").run(|| async { Ok(2) }).await;
    assert_eq!(after.unwrap(), 2);
}

/// A statement the caller stopped waiting for (here a claim behind a row
/// lock held by another session) is given up by the server too
/// (`statement_timeout` = the response timeout): it does not run on beside
/// the next, as purge batches slowed by dead rows once piled up until the
/// server refused connections.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_statement_the_caller_gave_up_on_is_given_up_by_the_server() {
    let url = pg_server::url().await;
    let app = format!(
        "idem-gave-up-{:08x}",
        idem::store::Token::random().to_u128() as u32
    );
    let options: sqlx::postgres::PgConnectOptions = url.parse().unwrap();
    let store = PostgresStore::builder()
        .schema(pg_server::unique_schema("gave_up"))
        .response_timeout(Duration::from_millis(300))
        .connect_with(options.application_name(&app))
        .await
        .unwrap();
    store.migrate().await.unwrap();
    let idem = Idempotency::new(store.clone());
    let first: Result<u8, Error> = idem
        .call("gave-up", "k")
        .fingerprint(&1)
        .run(|| async { Ok(1) })
        .await;
    assert_eq!(first.unwrap(), 1);
    // Another session locks every row of the table and keeps its
    // transaction open.
    let mut holder = sqlx::PgConnection::connect(&url).await.unwrap();
    sqlx::query("BEGIN").execute(&mut holder).await.unwrap();
    let lock = format!("SELECT 1 FROM {} FOR UPDATE", store.table());
    sqlx::query(&lock).execute(&mut holder).await.unwrap();
    let blocked: Result<u8, Error> = idem
        .call("gave-up", "k")
        .mismatch(idem::Mismatch::Rerun)
        .fingerprint(&2)
        .run(|| async { panic!("ran without a claim") })
        .await;
    assert!(matches!(blocked, Err(Error::Store(_))), "{blocked:?}");
    tokio::time::sleep(Duration::from_millis(500)).await;
    let waiting: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM pg_stat_activity WHERE application_name = $1 AND state = 'active'",
    )
    .bind(&app)
    .fetch_one(&mut holder)
    .await
    .unwrap();
    assert_eq!(waiting, 0, "the claim still runs at the server");
    sqlx::query("ROLLBACK").execute(&mut holder).await.unwrap();
}

/// The server itself frozen (SIGSTOP on the postmaster and every backend of
/// a private server) for 3 s: callers fail within a bound (the response
/// timeout on an open connection, the acquire timeout for a new one) with
/// an error naming it rather than hanging for the stall; no body runs
/// without a claim; once thawed (SIGCONT), the same store works again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sigstopped_server_fails_callers_within_the_response_timeout() {
    /// Thaws the server however the test ends, so that it can be stopped.
    struct Frozen<'a>(&'a pg_server::PrivateServer);
    impl Drop for Frozen<'_> {
        fn drop(&mut self) {
            self.0.pause(false);
        }
    }

    let server = pg_server::PrivateServer::start();
    let store = PostgresStore::builder()
        .response_timeout(Duration::from_millis(500))
        .acquire_timeout(Duration::from_millis(800))
        .connect(&server.url())
        .await
        .unwrap();
    store.migrate().await.unwrap();
    let idem = Idempotency::new(store);
    let warm: Result<u8, Error> = idem.call("sigstop", "k0").run(|| async { Ok(0) }).await;
    assert_eq!(warm.unwrap(), 0);
    // One connection: a second caller waits for it, and gives up after
    // the acquire timeout, while the first waits for the server's answer.
    let narrow = Idempotency::new(
        PostgresStore::builder()
            .max_connections(1)
            .response_timeout(Duration::from_millis(900))
            .acquire_timeout(Duration::from_millis(200))
            .connect(&server.url())
            .await
            .unwrap(),
    );
    let warm: Result<u8, Error> = narrow.call("sigstop", "n0").run(|| async { Ok(0) }).await;
    assert_eq!(warm.unwrap(), 0);

    server.pause(true);
    let frozen = Frozen(&server);
    let started = Instant::now();
    for key in 1..=3 {
        let call = Instant::now();
        let stalled: Result<u8, Error> = idem
            .call("sigstop", &key)
            .run(|| async { panic!("ran without a claim") })
            .await;
        let took = call.elapsed();
        let Err(Error::Store(err)) = stalled else {
            panic!("{stalled:?}")
        };
        let text = err.to_string();
        assert!(
            text.contains("response_timeout") || text.contains("acquire_timeout"),
            "{text}"
        );
        assert!(text.contains("stalled or unreachable"), "{text}");
        assert!(
            took < Duration::from_millis(1500),
            "call {key} took {took:?}"
        );
        println!("call {key} failed after {took:?}: {text}");
    }
    let stalled = async |key: &str| -> String {
        let out: Result<u8, Error> = narrow
            .call("sigstop", key)
            .run(|| async { panic!("ran without a claim") })
            .await;
        match out {
            Err(Error::Store(err)) => err.to_string(),
            other => panic!("{other:?}"),
        }
    };
    let (first, second) = tokio::join!(stalled("n1"), async {
        tokio::time::sleep(Duration::from_millis(50)).await;
        stalled("n2").await
    });
    assert!(first.contains("response_timeout"), "{first}");
    assert!(
        second.contains("no connection became free") && second.contains("acquire_timeout"),
        "{second}"
    );
    tokio::time::sleep(Duration::from_secs(3).saturating_sub(started.elapsed())).await;
    drop(frozen);

    let after: Result<u8, Error> = idem.call("sigstop", "k4").run(|| async { Ok(4) }).await;
    assert_eq!(after.unwrap(), 4);
}

/// A claimer that waited on another writer's lock reads a row written by
/// a statement that began after its own: the time left it answers is
/// still at most the writer's lease (issue 37: it answered the writer's
/// lease plus the wait, by the claimer's statement start).
#[tokio::test]
async fn a_claim_that_waited_on_a_writer_answers_at_most_its_lease() {
    let store = sql::store::<Pg>("left").await;
    let key = RecordKey::new("left", "k");
    // An expired claim, so the next claimer goes on to the claim function
    // and its insert, which waits on the row's lock.
    let first = store.claim(&key, &claim(Duration::from_millis(1))).await;
    assert!(matches!(first, Ok(ClaimOutcome::Won { .. })), "{first:?}");
    tokio::time::sleep(Duration::from_millis(20)).await;
    let table = store.table().to_owned();
    let mut writer = admin().await;
    let mut tx = writer.begin().await.unwrap();
    sqlx::query(&format!("SELECT 1 FROM {table} WHERE key = $1 FOR UPDATE"))
        .bind(&key.as_bytes()[..])
        .execute(&mut *tx)
        .await
        .unwrap();
    let claimer = tokio::spawn({
        let (store, key) = (store.clone(), key);
        async move { store.claim(&key, &claim(Duration::from_secs(30))).await }
    });
    wait_until_blocked_on_a_lock(&table).await;
    // Another claimer's takeover, written as the claim function writes
    // it: a lease of 10 s from its own statement's start, later than the
    // waiting claimer's.
    let lease = Duration::from_secs(10);
    sqlx::query(&format!(
        "UPDATE {table} SET token = $2, record = NULL, \
         expires_at = statement_timestamp() + $3 * interval '1 microsecond' WHERE key = $1"
    ))
    .bind(&key.as_bytes()[..])
    .bind(&Token::random().to_bytes()[..])
    .bind(lease.as_micros() as i64)
    .execute(&mut *tx)
    .await
    .unwrap();
    tx.commit().await.unwrap();
    match claimer.await.unwrap() {
        Ok(ClaimOutcome::InProgress { retry_after, .. }) => {
            assert!(
                retry_after <= lease,
                "{retry_after:?} left of a {lease:?} lease"
            )
        }
        other => panic!("expected in progress, got {other:?}"),
    }
}

/// Polls until a session of `table`'s schema waits on a lock.
async fn wait_until_blocked_on_a_lock(table: &str) {
    let schema = table.split('.').next().unwrap().trim_matches('"');
    let mut admin = admin().await;
    for _ in 0..1000 {
        let waiting: bool = sqlx::query_scalar(
            "SELECT EXISTS (SELECT 1 FROM pg_stat_activity \
             WHERE wait_event_type = 'Lock' AND query LIKE '%' || $1 || '%')",
        )
        .bind(schema)
        .fetch_one(&mut admin)
        .await
        .unwrap();
        if waiting {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("no claimer waited on the row's lock");
}
