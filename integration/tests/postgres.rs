//! The conformance suite on `PostgresStore`, and what is particular to it:
//! migrations, names, purge, connection loss, two processes racing.
//!
//! Needs a PostgreSQL server: see `support/pg_server.rs`.

#[path = "support/pg_server.rs"]
mod pg_server;
#[path = "support/turn_proxy.rs"]
mod turn_proxy;

use std::process::Command;
use std::time::{Duration, Instant};

use idem::admin::{Admin, RecordState};
use idem::fingerprint::Fingerprint;
use idem::key::RecordKey;
use idem::store::{Claim, ClaimOutcome, Fence, Retention, Token};
use idem::{Error, Idempotency, PostgresStore, Store};
use sqlx::Connection;
use sqlx::postgres::PgConnection;
use turn_proxy::TurnProxy;

/// A store on a table of its own, migrated.
async fn store(test: &str) -> PostgresStore {
    let url = pg_server::url().await;
    let store = PostgresStore::builder()
        .schema(pg_server::unique_schema(test))
        .connect(&url)
        .await
        .expect("connect");
    store.migrate().await.expect("migrate");
    store
}

idem_conformance::suite!(async { Idempotency::new(store("conf").await) });

fn claim(lease: Duration) -> Claim {
    Claim::new(Token::random(), Fingerprint::NONE, lease, "postgres-test")
}

async fn admin() -> PgConnection {
    PgConnection::connect(&pg_server::url().await)
        .await
        .expect("admin connection")
}

async fn count(conn: &mut PgConnection, table: &str) -> i64 {
    sqlx::query_scalar(&format!("SELECT count(*) FROM {table}"))
        .fetch_one(conn)
        .await
        .unwrap()
}

#[tokio::test]
async fn migrate_twice_and_concurrently_is_harmless() {
    let url = pg_server::url().await;
    pg_server::drop_stale_schemas(&url).await;
    let schema = pg_server::unique_schema("migrate");
    let stores: Vec<PostgresStore> = futures::future::join_all((0..4).map(|_| {
        PostgresStore::builder()
            .schema(schema.clone())
            .table("records")
            .connect(&url)
    }))
    .await
    .into_iter()
    .map(Result::unwrap)
    .collect();
    // Four replicas start at once, then one starts again.
    for done in futures::future::join_all(stores.iter().map(|s| s.migrate())).await {
        done.unwrap();
    }
    stores[0].migrate().await.unwrap();
    let mut admin = admin().await;
    let versions: Vec<i32> = sqlx::query_scalar(&format!(
        "SELECT version FROM \"{schema}\".records_migrations ORDER BY version"
    ))
    .fetch_all(&mut admin)
    .await
    .unwrap();
    assert_eq!(versions, vec![1]);
    assert_eq!(stores[0].table(), format!("\"{schema}\".\"records\""));
    let idem = Idempotency::new(stores[1].clone());
    let out: Result<u8, Error> = idem.call("m", "k").run(|| async { Ok(1) }).await;
    assert_eq!(out.unwrap(), 1);
    assert_eq!(count(&mut admin, stores[0].table()).await, 1);
}

/// A table at a schema version this release does not know (a later
/// release's, or a build's before 0.1) is refused, and left as it is.
#[tokio::test]
async fn migrate_refuses_an_unknown_schema_version() {
    let url = pg_server::url().await;
    let schema = pg_server::unique_schema("unknown_version");
    let store = PostgresStore::builder()
        .schema(schema.clone())
        .connect(&url)
        .await
        .unwrap();
    store.migrate().await.unwrap();
    let mut admin = admin().await;
    let versions = format!("\"{schema}\".idem_records_migrations");
    sqlx::query(&format!("INSERT INTO {versions} (version) VALUES (5)"))
        .execute(&mut admin)
        .await
        .unwrap();
    let err = store.migrate().await.unwrap_err().to_string();
    assert!(
        err.contains("schema version 5") && err.contains("before 0.1"),
        "{err}"
    );
    let kept: Vec<i32> =
        sqlx::query_scalar(&format!("SELECT version FROM {versions} ORDER BY version"))
            .fetch_all(&mut admin)
            .await
            .unwrap();
    assert_eq!(kept, vec![1, 5]);
}

#[tokio::test]
async fn custom_schema_and_table() {
    let url = pg_server::url().await;
    let schema = pg_server::unique_schema("names");
    let a = PostgresStore::builder()
        .schema(schema.clone())
        .table("payments_idem")
        .connect(&url)
        .await
        .unwrap();
    let b = PostgresStore::builder()
        .schema(schema.clone())
        .table("orders_idem")
        .connect(&url)
        .await
        .unwrap();
    a.migrate().await.unwrap();
    b.migrate().await.unwrap();
    // The same scope and key in two tables are two records.
    let one: Result<u8, Error> = Idempotency::new(a.clone())
        .call("s", "k")
        .run(|| async { Ok(1) })
        .await;
    let two: Result<u8, Error> = Idempotency::new(b.clone())
        .call("s", "k")
        .run(|| async { Ok(2) })
        .await;
    assert_eq!((one.unwrap(), two.unwrap()), (1, 2));
    let mut admin = admin().await;
    assert_eq!(
        count(&mut admin, &format!("\"{schema}\".payments_idem")).await,
        1
    );
    assert_eq!(
        count(&mut admin, &format!("\"{schema}\".orders_idem")).await,
        1
    );
    // Names are quoted into SQL: only plain identifiers pass.
    for bad in ["x\"; DROP TABLE y; --", "", "1abc", "a b"] {
        let err = PostgresStore::builder()
            .table(bad)
            .connect(&url)
            .await
            .unwrap_err();
        assert!(err.to_string().contains("invalid table name"), "{err}");
    }
}

#[tokio::test]
async fn purge_expired_deletes_only_expired_rows_in_batches() {
    let url = pg_server::url().await;
    let store = PostgresStore::builder()
        .schema(pg_server::unique_schema("purge"))
        .purge_batch(7)
        .connect(&url)
        .await
        .unwrap();
    store.migrate().await.unwrap();
    // Long enough that no row expires before the first purge, even on a
    // loaded machine.
    let short = Duration::from_secs(2);
    let started = Instant::now();
    // 30 completed records and 20 claims that expire soon, 5 of each that
    // do not.
    for i in 0..60u32 {
        let key = RecordKey::new("purge", &i);
        let lasting = i % 6 == 0;
        let life = if lasting {
            Duration::from_secs(60)
        } else {
            short
        };
        let c = claim(life);
        assert!(matches!(
            store.claim(&key, &c).await.unwrap(),
            ClaimOutcome::Won { .. }
        ));
        if i % 2 == 0 {
            assert_eq!(
                store
                    .complete(&key, c.token, b"r", Retention::new(life))
                    .await
                    .unwrap(),
                Fence::Held
            );
        } else {
            // A recovery point of the claim, expiring with it.
            let step = idem::store::StepId::new(&"s");
            let saved = store.save_step(&key, c.token, step, b"v", life);
            assert_eq!(saved.await.unwrap(), Fence::Held);
        }
    }
    assert_eq!(store.purge_expired().await.unwrap(), 0);
    assert!(
        started.elapsed() < short,
        "too slow to test: {:?}",
        started.elapsed()
    );
    // Every short row expires within `short` of its own write, which
    // ended by now.
    let written = std::time::Instant::now();
    tokio::time::sleep_until((written + short + Duration::from_millis(100)).into()).await;
    // 50 records and claims, and the 30 steps of the (short) claims.
    assert_eq!(store.purge_expired().await.unwrap(), 50 + 30);
    let mut admin = admin().await;
    assert_eq!(count(&mut admin, store.table()).await, 10);
    assert_eq!(store.purge_expired().await.unwrap(), 0);
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
    let idem = Idempotency::new(store.clone());
    let runs = idem_conformance::Counter::default();
    let call = |key: &'static str| {
        let (idem, runs) = (idem.clone(), runs.clone());
        async move {
            idem.call("loss", key)
                .run(|| async {
                    runs.bump();
                    Ok::<_, Error>(key.len())
                })
                .await
        }
    };
    assert_eq!(call("before").await.unwrap(), 6);
    assert_eq!(runs.get(), 1);

    server.stop();
    for key in ["down-1", "down-2", "down-3"] {
        let out = call(key).await;
        assert!(matches!(out, Err(Error::Store(_))), "{out:?}");
    }
    assert_eq!(runs.get(), 1, "a body ran without a claim");

    server.restart();
    assert_eq!(call("after").await.unwrap(), 5);
    assert_eq!(runs.get(), 2);
    // The record written before the outage is still replayed.
    assert_eq!(call("before").await.unwrap(), 6);
    assert_eq!(runs.get(), 2);
}

/// The store's sessions are terminated by the server while idle: the next
/// steps find out, open new connections and succeed.
#[tokio::test]
async fn terminated_sessions_are_replaced_transparently() {
    let url = pg_server::url().await;
    let app = format!("idem_terminate_{:x}", Token::random().to_u128() as u32);
    let options: sqlx::postgres::PgConnectOptions = url.parse().unwrap();
    let store = PostgresStore::builder()
        .schema(pg_server::unique_schema("terminate"))
        .connect_with(options.application_name(&app))
        .await
        .unwrap();
    store.migrate().await.unwrap();
    let idem = Idempotency::new(store);
    // Open a few connections.
    let warm = (0..4).map(|i| {
        let idem = idem.clone();
        async move {
            idem.call("warm", &i)
                .run(|| async {
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    Ok::<_, Error>(i)
                })
                .await
        }
    });
    for out in futures::future::join_all(warm).await {
        out.unwrap();
    }
    let mut admin = admin().await;
    let killed: Vec<bool> = sqlx::query_scalar(
        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = $1",
    )
    .bind(&app)
    .fetch_all(&mut admin)
    .await
    .unwrap();
    assert!(!killed.is_empty() && killed.iter().all(|k| *k));
    for i in 0..8u32 {
        let out: Result<u32, Error> = idem.call("after", &i).run(|| async { Ok(i) }).await;
        assert_eq!(out.unwrap(), i);
    }
}

/// Environment variable that makes `race_worker` a worker.
const WORKER: &str = "IDEM_PG_RACE_WORKER";
const KEYS: u32 = 1000;

/// Two OS processes race on the same 1,000 keys through one PostgreSQL;
/// every body increments a counter row, so the table says how often each
/// body ran in total.
#[tokio::test]
async fn two_processes_racing_run_each_body_once() {
    let url = pg_server::url().await;
    let schema = pg_server::unique_schema("race");
    let store = PostgresStore::builder()
        .schema(schema.clone())
        .connect(&url)
        .await
        .unwrap();
    store.migrate().await.unwrap();
    let mut admin = admin().await;
    sqlx::raw_sql(&format!(
        "CREATE TABLE \"{schema}\".runs (key int PRIMARY KEY, n int NOT NULL)"
    ))
    .execute(&mut admin)
    .await
    .unwrap();
    let started = Instant::now();
    let workers: Vec<_> = (0..2)
        .map(|_| {
            Command::new(std::env::current_exe().unwrap())
                .args(["race_worker", "--exact", "--nocapture", "--test-threads=1"])
                .env(WORKER, &schema)
                .env("IDEM_TEST_DATABASE_URL", &url)
                .spawn()
                .unwrap()
        })
        .collect();
    for mut worker in workers {
        assert!(worker.wait().unwrap().success(), "a worker failed");
    }
    let elapsed = started.elapsed();
    let (rows, total, max): (i64, i64, i32) = sqlx::query_as(&format!(
        "SELECT count(*), coalesce(sum(n), 0), coalesce(max(n), 0) FROM \"{schema}\".runs"
    ))
    .fetch_one(&mut admin)
    .await
    .unwrap();
    println!("2 processes x {KEYS} keys in {elapsed:?}");
    assert_eq!((rows, total, max), (i64::from(KEYS), i64::from(KEYS), 1));
}

/// Not a test of its own: the entry point of `two_processes_racing…`'s
/// child processes (a no-op unless `IDEM_PG_RACE_WORKER` is set).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn race_worker() {
    let Ok(schema) = std::env::var(WORKER) else {
        return;
    };
    let url = pg_server::url().await;
    let store = PostgresStore::builder()
        .schema(schema.clone())
        .connect(&url)
        .await
        .unwrap();
    let idem = Idempotency::new(store);
    let mut counter = PgConnection::connect(&url).await.unwrap();
    let bump = format!(
        "INSERT INTO \"{schema}\".runs (key, n) VALUES ($1, 1) \
         ON CONFLICT (key) DO UPDATE SET n = runs.n + 1"
    );
    let counter = tokio::sync::Mutex::new(&mut counter);
    let tasks = (0..KEYS).map(|key| {
        let (idem, bump, counter) = (&idem, &bump, &counter);
        async move {
            // Both processes go through the keys in the same order, so
            // they collide on most of them; a call that meets the other's
            // claim waits for its value.
            idem.call("race", &key)
                .wait(Duration::from_secs(30))
                .run(|| async {
                    sqlx::query(bump)
                        .bind(key as i32)
                        .execute(&mut **counter.lock().await)
                        .await
                        .map_err(|err| Error::Store(idem::StoreError::new("counter", err)))?;
                    Ok::<_, Error>(key)
                })
                .await
        }
    });
    use futures::StreamExt;
    let results: Vec<_> = futures::stream::iter(tasks)
        .buffer_unordered(16)
        .collect()
        .await;
    for out in results {
        out.unwrap();
    }
}

/// Each step is one round trip, and so is a replay. Counted on
/// the wire, through a proxy, for both kinds of connections.
#[tokio::test]
async fn each_step_is_one_round_trip() {
    let url = pg_server::url().await;
    let schema = pg_server::unique_schema("turns");
    let direct: sqlx::postgres::PgConnectOptions = url.parse().unwrap();
    let upstream = format!("{}:{}", direct.get_host(), direct.get_port());
    let proxy = TurnProxy::start(upstream).await;
    let via_proxy = direct.host("127.0.0.1").port(proxy.addr.port());
    let own = PostgresStore::builder()
        .schema(schema.clone())
        .max_connections(1)
        .connect_with(via_proxy.clone())
        .await
        .unwrap();
    own.migrate().await.unwrap();
    let pool = sqlx::postgres::PgPoolOptions::new()
        .max_connections(1)
        .test_before_acquire(false)
        .connect_with(via_proxy.clone())
        .await
        .unwrap();
    let pooled = PostgresStore::builder()
        .schema(schema.clone())
        .from_pool(pool)
        .unwrap();
    let default_pool = sqlx::postgres::PgPoolOptions::new()
        .max_connections(1)
        .connect_with(via_proxy)
        .await
        .unwrap();
    let default_pooled = PostgresStore::builder()
        .schema(schema)
        .from_pool(default_pool)
        .unwrap();

    let mut report = Vec::new();
    let stores = [
        ("own", &own as &dyn Store),
        ("pool", &pooled),
        ("default pool", &default_pooled),
    ];
    for (name, store) in stores {
        // Warm up: the first use of each statement on a connection
        // prepares it.
        for _ in 0..2 {
            let key = RecordKey::new("warm", &Token::random().to_u128());
            let c = claim(Duration::from_secs(30));
            store.claim(&key, &c).await.unwrap();
            store.renew(&key, c.token, c.lease).await.unwrap();
            store.release(&key, c.token).await.unwrap();
            store.claim(&key, &c).await.unwrap();
            store
                .complete(&key, c.token, b"r", Retention::new(c.lease))
                .await
                .unwrap();
        }
        proxy.take().await;
        let key = RecordKey::new("turns", &Token::random().to_u128());
        let c = claim(Duration::from_secs(30));
        store.claim(&key, &c).await.unwrap();
        let claim_turns = proxy.take().await;
        store.renew(&key, c.token, c.lease).await.unwrap();
        let renew_turns = proxy.take().await;
        store
            .complete(&key, c.token, b"r", Retention::new(c.lease))
            .await
            .unwrap();
        let complete_turns = proxy.take().await;
        let again = claim(Duration::from_secs(30));
        assert!(matches!(
            store.claim(&key, &again).await.unwrap(),
            ClaimOutcome::Completed { .. }
        ));
        let replay_turns = proxy.take().await;
        let other = RecordKey::new("turns", &Token::random().to_u128());
        store.claim(&other, &c).await.unwrap();
        proxy.take().await;
        store.release(&other, c.token).await.unwrap();
        let release_turns = proxy.take().await;
        let turns = [
            claim_turns,
            renew_turns,
            complete_turns,
            replay_turns,
            release_turns,
        ];
        println!("{name}: turns for claim, renew, complete, replay, release = {turns:?}");
        report.push((name, turns));
    }
    // The store's own connections: one turn per step.
    assert_eq!(report[0].1, [1; 5], "{report:?}");
    // A sqlx pool without test_before_acquire: the statement plus the ping
    // on release.
    assert_eq!(report[1].1, [2; 5], "{report:?}");
    // sqlx's defaults: a ping before the statement too.
    assert_eq!(report[2].1, [3; 5], "{report:?}");
}

#[tokio::test]
async fn a_store_used_before_migrate_says_to_migrate() {
    let store = PostgresStore::builder()
        .schema(pg_server::unique_schema("nomig"))
        .connect(&pg_server::url().await)
        .await
        .expect("connect");
    let idem = Idempotency::new(store);
    let out: Result<u8, Error> = idem.call("s", "k").run(|| async { Ok(1) }).await;
    let Err(Error::Store(err)) = out else {
        panic!("expected a store error, got {out:?}");
    };
    let message = err.to_string();
    assert!(message.contains("PostgresStore::migrate()"), "{message}");
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
    let url = pg_server::url().await;
    let direct: sqlx::postgres::PgConnectOptions = url.parse().unwrap();
    let upstream = format!("{}:{}", direct.get_host(), direct.get_port());
    let proxy = TurnProxy::start(upstream).await;
    let store = PostgresStore::builder()
        .schema(pg_server::unique_schema("stall"))
        .response_timeout(Duration::from_millis(500))
        .connect_with(direct.host("127.0.0.1").port(proxy.addr.port()))
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
    let store = store("left").await;
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

/// A record past its TTL whose tombstone stands lists and counts as a
/// tombstone; a purge drops its value (it still answers `Expired`).
#[tokio::test]
async fn admin_lists_counts_and_compacts_tombstones() {
    let store = store("tombstone_admin").await;
    let idem = Idempotency::new(store.clone());
    let pay = || {
        idem.call("tomb", "o-1")
            .ttl(Duration::from_millis(300))
            .tombstone(Duration::from_secs(60))
            .run(|| async { Ok::<_, Error>("charged".repeat(20)) })
    };
    pay().await.unwrap();
    tokio::time::sleep(Duration::from_millis(800)).await;
    let key = RecordKey::new("tomb", "o-1");
    let info = store
        .inspect(&key)
        .await
        .unwrap()
        .expect("the tombstone's row");
    assert_eq!(info.state, RecordState::Tombstone);
    assert!(
        info.expires_in
            .is_some_and(|left| left > Duration::from_secs(30))
    );
    assert!(info.size > 0, "a value before the purge");
    assert_eq!(store.stats().await.unwrap().tombstones, 1);
    assert!(store.purge().await.unwrap().tombstones >= 1);
    let info = store
        .inspect(&key)
        .await
        .unwrap()
        .expect("the tombstone's row");
    assert_eq!((info.state, info.size), (RecordState::Tombstone, 0));
    assert!(matches!(pay().await, Err(Error::Expired { .. })));
}
