//! The conformance suite on `MySqlStore` (run here on MariaDB), and what is
//! particular to it: migrations, names, purge, round trips, two processes
//! racing, hostile keys, fencing by the server's clock, a server that goes
//! away.
//!
//! Needs a MySQL or MariaDB server: see `support/mysql_server.rs`.

#[path = "support/mysql_server.rs"]
mod mysql_server;
#[path = "support/tcp_gate.rs"]
mod tcp_gate;
#[path = "support/turn_proxy.rs"]
mod turn_proxy;

use std::process::Command;
use std::time::{Duration, Instant};

use idem::admin::{Admin, ListFilter, Purged, RecordState};
use idem::fingerprint::Fingerprint;
use idem::key::RecordKey;
use idem::store::{Claim, ClaimOutcome, Fence, Retention, StepId, Token};
use idem::{Error, Idempotency, MySqlStore, Store};
use sqlx::mysql::{MySqlConnectOptions, MySqlConnection};
use tcp_gate::TcpGate;
use turn_proxy::TurnProxy;

/// A store on a table of its own, migrated.
async fn store(test: &str) -> MySqlStore {
    let store = MySqlStore::builder()
        .table(mysql_server::unique_table(test))
        .connect(&mysql_server::url().await)
        .await
        .expect("connect");
    store.migrate().await.expect("migrate");
    store
}

idem_conformance::suite!(async { Idempotency::new(store("conf").await) });

fn claim(lease: Duration) -> Claim {
    Claim::new(Token::random(), Fingerprint::NONE, lease, "mysql-test")
}

async fn count(conn: &mut MySqlConnection, table: &str) -> i64 {
    sqlx::query_scalar(&format!("SELECT COUNT(*) FROM {table}"))
        .fetch_one(conn)
        .await
        .unwrap()
}

/// The test server's options, and its "host:port" for a proxy.
async fn direct() -> (MySqlConnectOptions, String) {
    let direct: MySqlConnectOptions = mysql_server::url().await.parse().unwrap();
    let upstream = format!("{}:{}", direct.get_host(), direct.get_port());
    (direct, upstream)
}

/// A table at a schema version this release does not know (a later
/// release's, or a build's before 0.1) is refused, and left as it is.
#[tokio::test]
async fn migrate_refuses_an_unknown_schema_version() {
    let url = mysql_server::url().await;
    let table = mysql_server::unique_table("unknown_version");
    let store = MySqlStore::builder()
        .table(table.clone())
        .connect(&url)
        .await
        .unwrap();
    store.migrate().await.unwrap();
    let mut admin = mysql_server::admin().await;
    sqlx::query(&format!(
        "INSERT INTO `{table}_migrations` (version, applied_at) VALUES (2, UTC_TIMESTAMP(6))"
    ))
    .execute(&mut admin)
    .await
    .unwrap();
    let err = store.migrate().await.unwrap_err().to_string();
    assert!(
        err.contains("schema version 2") && err.contains("before 0.1"),
        "{err}"
    );
    let kept: Vec<i32> = sqlx::query_scalar(&format!(
        "SELECT version FROM `{table}_migrations` ORDER BY version"
    ))
    .fetch_all(&mut admin)
    .await
    .unwrap();
    assert_eq!(kept, vec![1, 2]);
}

#[tokio::test]
async fn migrate_twice_and_concurrently_is_harmless() {
    mysql_server::drop_stale_tables().await;
    let url = mysql_server::url().await;
    let table = mysql_server::unique_table("migrate");
    let stores: Vec<MySqlStore> = futures::future::join_all(
        (0..4).map(|_| MySqlStore::builder().table(table.clone()).connect(&url)),
    )
    .await
    .into_iter()
    .map(Result::unwrap)
    .collect();
    // Four replicas start at once, then one starts again.
    for done in futures::future::join_all(stores.iter().map(|s| s.migrate())).await {
        done.unwrap();
    }
    stores[0].migrate().await.unwrap();
    let mut admin = mysql_server::admin().await;
    let versions: Vec<i32> = sqlx::query_scalar(&format!(
        "SELECT version FROM `{table}_migrations` ORDER BY version"
    ))
    .fetch_all(&mut admin)
    .await
    .unwrap();
    assert_eq!(versions, vec![1]);
    // MySQL commits each DDL statement on its own: a run that stopped
    // before recording its version runs every statement again without
    // failing.
    sqlx::query(&format!(
        "DELETE FROM `{table}_migrations` WHERE version = 1"
    ))
    .execute(&mut admin)
    .await
    .unwrap();
    stores[2].migrate().await.unwrap();
    assert_eq!(stores[0].table(), format!("`{table}`"));
    let idem = Idempotency::new(stores[1].clone());
    let out: Result<u8, Error> = idem.call("m", "k").run(|| async { Ok(1) }).await;
    assert_eq!(out.unwrap(), 1);
    assert_eq!(count(&mut admin, stores[0].table()).await, 1);
}

#[tokio::test]
async fn custom_database_and_table_and_bad_names() {
    let url = mysql_server::url().await;
    let base = mysql_server::unique_table("names");
    let database: String = sqlx::query_scalar("SELECT DATABASE()")
        .fetch_one(&mut mysql_server::admin().await)
        .await
        .unwrap();
    let a = MySqlStore::builder()
        .database(&database)
        .table(format!("{base}_pay"))
        .connect(&url)
        .await
        .unwrap();
    let b = MySqlStore::builder()
        .table(format!("{base}_ord"))
        .connect(&url)
        .await
        .unwrap();
    a.migrate().await.unwrap();
    b.migrate().await.unwrap();
    assert_eq!(a.table(), format!("`{database}`.`{base}_pay`"));
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
    let mut admin = mysql_server::admin().await;
    assert_eq!(count(&mut admin, a.table()).await, 1);
    assert_eq!(count(&mut admin, b.table()).await, 1);
    // Names are quoted into SQL: only plain identifiers pass.
    for bad in ["x`; DROP TABLE y; --", "", "1abc", "a b", &"t".repeat(54)] {
        let err = MySqlStore::builder()
            .table(bad)
            .connect(&url)
            .await
            .unwrap_err();
        assert!(err.to_string().contains("invalid table name"), "{err}");
        assert_eq!(err.kind(), idem::StoreErrorKind::Misconfigured, "{err}");
    }
    let err = MySqlStore::builder()
        .database("te`st")
        .connect(&url)
        .await
        .unwrap_err();
    assert!(err.to_string().contains("invalid database name"), "{err}");
}

#[tokio::test]
async fn purge_expired_deletes_only_expired_rows_in_batches() {
    let store = MySqlStore::builder()
        .table(mysql_server::unique_table("purge"))
        .purge_batch(7)
        .connect(&mysql_server::url().await)
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
            let saved = store.save_step(&key, c.token, StepId::new(&"s"), b"v", life);
            assert_eq!(saved.await.unwrap(), Fence::Held);
        }
    }
    assert_eq!(store.purge_expired().await.unwrap(), 0);
    assert!(
        started.elapsed() < short,
        "too slow to test: {:?}",
        started.elapsed()
    );
    let written = Instant::now();
    tokio::time::sleep_until((written + short + Duration::from_millis(100)).into()).await;
    // 50 records and claims, and the 30 steps of the (short) claims.
    assert_eq!(store.purge_expired().await.unwrap(), 50 + 30);
    let mut admin = mysql_server::admin().await;
    assert_eq!(count(&mut admin, store.table()).await, 10);
    assert_eq!(store.purge_expired().await.unwrap(), 0);
}

#[tokio::test]
async fn a_store_used_before_migrate_says_to_migrate() {
    let store = MySqlStore::builder()
        .table(mysql_server::unique_table("nomig"))
        .connect(&mysql_server::url().await)
        .await
        .expect("connect");
    let idem = Idempotency::new(store);
    let out: Result<u8, Error> = idem.call("s", "k").run(|| async { Ok(1) }).await;
    let Err(Error::Store(err)) = out else {
        panic!("expected a store error, got {out:?}");
    };
    let message = err.to_string();
    assert!(message.contains("MySqlStore::migrate()"), "{message}");
    // Not a fault to retry: as PostgreSQL's, a setup to fix.
    assert_eq!(err.kind(), idem::StoreErrorKind::Misconfigured, "{err}");
}

/// Keys are hashed before they reach SQL: quotes, backticks, NULs,
/// comment markers, invalid UTF-8 and a megabyte of bytes are keys like any
/// other, each its own record, and none reaches the table as text.
#[tokio::test]
async fn hostile_keys_are_ordinary_keys() {
    let store = store("hostile").await;
    let idem = Idempotency::new(store.clone());
    let huge = vec![b'\''; 1 << 20];
    let keys: Vec<&[u8]> = vec![
        b"'; DROP TABLE idem_records; --",
        b"`key` = `key` OR 1=1 #",
        b"\0",
        b"\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0",
        b"\\\\' \" /* */ \n\r\t",
        b"\xff\xfe\x80 not utf-8",
        "ключ 🔑 مفتاح".as_bytes(),
        &huge,
    ];
    for (i, key) in keys.iter().enumerate() {
        let out: Result<usize, Error> = idem.call("hostile", *key).run(|| async { Ok(i) }).await;
        assert_eq!(out.unwrap(), i, "key {i}");
    }
    // Each replays its own value, without running.
    for (i, key) in keys.iter().enumerate() {
        let out: Result<usize, Error> = idem
            .call("hostile", *key)
            .run(|| async { panic!("key {i} ran twice") })
            .await;
        assert_eq!(out.unwrap(), i, "key {i}");
    }
    let mut admin = mysql_server::admin().await;
    assert_eq!(count(&mut admin, store.table()).await, keys.len() as i64);
    let lengths: Vec<i64> = sqlx::query_scalar(&format!(
        "SELECT DISTINCT CAST(LENGTH(`key`) AS SIGNED) FROM {}",
        store.table()
    ))
    .fetch_all(&mut admin)
    .await
    .unwrap();
    assert_eq!(lengths, vec![32]);
}

/// Expiry is the server's to judge: a claim whose row the server dates in
/// the past is taken over at once, and its late holder's completion,
/// renewal and release are refused (`Lost`); a claim the server still
/// dates in the future is not, whatever the clients' clocks say.
#[tokio::test]
async fn fencing_follows_the_server_clock() {
    let store = store("fencing").await;
    let mut admin = mysql_server::admin().await;
    let key = RecordKey::new("fence", &"k");
    let first = claim(Duration::from_secs(3600));
    assert!(matches!(
        store.claim(&key, &first).await.unwrap(),
        ClaimOutcome::Won {
            took_over: false,
            ..
        }
    ));
    // A second claimer meets the live claim, however long it has waited.
    let second = claim(Duration::from_secs(60));
    assert!(matches!(
        store.claim(&key, &second).await.unwrap(),
        ClaimOutcome::InProgress { .. }
    ));
    // The server's clock moves past the lease (the row is dated back).
    sqlx::query(&format!(
        "UPDATE {} SET expires_at = UTC_TIMESTAMP(6) - INTERVAL 1 SECOND",
        store.table()
    ))
    .execute(&mut admin)
    .await
    .unwrap();
    assert!(matches!(
        store.claim(&key, &second).await.unwrap(),
        ClaimOutcome::Won {
            took_over: true,
            ..
        }
    ));
    // The first holder is fenced out of every step.
    let lease = Duration::from_secs(60);
    assert_eq!(
        store
            .complete(&key, first.token, b"late", Retention::new(lease))
            .await
            .unwrap(),
        Fence::Lost
    );
    assert_eq!(
        store.renew(&key, first.token, lease).await.unwrap(),
        Fence::Lost
    );
    assert_eq!(store.release(&key, first.token).await.unwrap(), Fence::Lost);
    let step = store.save_step(&key, first.token, StepId::new(&"s"), b"v", lease);
    assert_eq!(step.await.unwrap(), Fence::Lost);
    // The new holder completes; the record is its.
    assert_eq!(
        store
            .complete(&key, second.token, b"mine", Retention::new(lease))
            .await
            .unwrap(),
        Fence::Held
    );
    let ClaimOutcome::Completed { record, .. } = store.claim(&key, &claim(lease)).await.unwrap()
    else {
        panic!("not completed")
    };
    assert_eq!(&record[..], b"mine");
    // A lapsed claim nobody took is Expired, not Lost.
    let other = RecordKey::new("fence", &"lapsed");
    let lapsed = claim(Duration::from_secs(3600));
    store.claim(&other, &lapsed).await.unwrap();
    sqlx::query(&format!(
        "UPDATE {} SET expires_at = UTC_TIMESTAMP(6) - INTERVAL 1 SECOND WHERE `key` = ?",
        store.table()
    ))
    .bind(&other.as_bytes()[..])
    .execute(&mut admin)
    .await
    .unwrap();
    assert_eq!(
        store
            .complete(&other, lapsed.token, b"late", Retention::new(lease))
            .await
            .unwrap(),
        Fence::Expired
    );
}

/// Admin, as the CLI uses it: list, inspect, stats, purge.
#[tokio::test]
async fn admin_lists_inspects_and_counts() {
    let store = store("admin").await;
    let idem = Idempotency::new(store.clone());
    let done: Result<String, Error> = idem
        .call("admin", "done")
        .run(|| async { Ok("receipt".to_owned()) })
        .await;
    done.unwrap();
    let running = RecordKey::new("admin", &"running");
    store
        .claim(&running, &claim(Duration::from_secs(60)))
        .await
        .unwrap();
    let stats = store.stats().await.unwrap();
    assert_eq!(
        (stats.in_progress, stats.completed, stats.expired),
        (1, 1, 0)
    );
    assert!(stats.bytes > 0);
    let all = store.list(&ListFilter::default()).await.unwrap();
    assert_eq!(all.len(), 2);
    let stuck = ListFilter::default().in_progress();
    let stuck = store.list(&stuck).await.unwrap();
    assert_eq!(stuck.len(), 1);
    assert_eq!(stuck[0].key, running);
    assert_eq!(stuck[0].state, RecordState::InProgress);
    assert_eq!(stuck[0].site.as_deref(), Some("mysql-test"));
    let old = ListFilter::default().older_than(Duration::from_secs(3600));
    assert!(store.list(&old).await.unwrap().is_empty());
    let done_key = all.iter().find(|r| r.key != running).unwrap().key;
    let info = store.inspect(&done_key).await.unwrap().unwrap();
    assert_eq!(info.state, RecordState::Completed);
    let parts = idem::admin::decode_record_json(info.record.as_ref().unwrap()).unwrap();
    assert_eq!(parts.value, serde_json::json!("receipt"));
    assert!(
        store
            .inspect(&RecordKey::new("admin", &"none"))
            .await
            .unwrap()
            .is_none()
    );
    assert_eq!(store.purge().await.unwrap(), Purged::default());
}

/// Each step is one round trip, and so is a replay: counted on the wire,
/// through a proxy, for the store's own connections and for sqlx pools.
#[tokio::test]
async fn each_step_is_one_round_trip() {
    let table = mysql_server::unique_table("turns");
    let (direct, upstream) = direct().await;
    let proxy = TurnProxy::start(upstream).await;
    let via_proxy = direct.host("127.0.0.1").port(proxy.addr.port());
    let own = MySqlStore::builder()
        .table(table.clone())
        .max_connections(1)
        .connect_with(via_proxy.clone())
        .await
        .unwrap();
    own.migrate().await.unwrap();
    let pool = sqlx::mysql::MySqlPoolOptions::new()
        .max_connections(1)
        .test_before_acquire(false)
        .connect_with(via_proxy.clone())
        .await
        .unwrap();
    let pooled = MySqlStore::builder()
        .table(table.clone())
        .from_pool(pool)
        .unwrap();
    let default_pool = sqlx::mysql::MySqlPoolOptions::new()
        .max_connections(1)
        .connect_with(via_proxy)
        .await
        .unwrap();
    let default_pooled = MySqlStore::builder()
        .table(table)
        .from_pool(default_pool)
        .unwrap();

    let mut report = Vec::new();
    let stores = [
        ("own", &own as &dyn Store),
        ("pool", &pooled),
        ("default pool", &default_pooled),
    ];
    for (name, store) in stores {
        let step = StepId::new(&"s");
        // Warm up: the first use of each statement on a connection
        // prepares it.
        for _ in 0..2 {
            let key = RecordKey::new("warm", &Token::random().to_u128());
            let c = claim(Duration::from_secs(30));
            store.claim(&key, &c).await.unwrap();
            store.renew(&key, c.token, c.lease).await.unwrap();
            store
                .save_step(&key, c.token, step, b"v", c.lease)
                .await
                .unwrap();
            store.release(&key, c.token).await.unwrap();
            store.claim(&key, &c).await.unwrap();
            store
                .complete(&key, c.token, b"r", Retention::new(c.lease))
                .await
                .unwrap();
            store.claim(&key, &c).await.unwrap();
        }
        proxy.take().await;
        let key = RecordKey::new("turns", &Token::random().to_u128());
        let c = claim(Duration::from_secs(30));
        store.claim(&key, &c).await.unwrap();
        let claim_turns = proxy.take().await;
        store.renew(&key, c.token, c.lease).await.unwrap();
        let renew_turns = proxy.take().await;
        store
            .save_step(&key, c.token, step, b"v", c.lease)
            .await
            .unwrap();
        let step_turns = proxy.take().await;
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
            step_turns,
            complete_turns,
            replay_turns,
            release_turns,
        ];
        println!(
            "{name}: turns for claim, renew, save_step, complete, replay, release = {turns:?}"
        );
        report.push((name, turns));
    }
    // The store's own connections: one turn per step.
    assert_eq!(report[0].1, [1; 6], "{report:?}");
    // A sqlx pool without test_before_acquire: the statement plus the ping
    // on release.
    assert_eq!(report[1].1, [2; 6], "{report:?}");
    // sqlx's defaults: a ping before the statement too.
    assert_eq!(report[2].1, [3; 6], "{report:?}");
}

/// Nothing listens where the store is pointed: connecting fails with a
/// store error, and a store on a lazy pool fails every call closed, the
/// body never running.
#[tokio::test]
async fn an_unreachable_server_fails_closed() {
    let closed = mysql_server::ports::closed();
    let url = format!("mysql://root@127.0.0.1:{}/test", closed.port);
    let err = MySqlStore::builder()
        .acquire_timeout(Duration::from_secs(2))
        .connect(&url)
        .await
        .unwrap_err();
    assert_eq!(err.backend(), "mysql", "{err}");
    let pool = sqlx::mysql::MySqlPoolOptions::new()
        .acquire_timeout(Duration::from_secs(2))
        .connect_lazy(&url)
        .unwrap();
    let idem = Idempotency::new(MySqlStore::from_pool(pool));
    let out: Result<u8, Error> = idem
        .call("closed", "k")
        .run(|| async { panic!("ran without a claim") })
        .await;
    assert!(matches!(out, Err(Error::Store(_))), "{out:?}");
}

/// The server goes away (its port closed, every connection cut) and comes
/// back: calls fail with `Error::Store` and run no body meanwhile, and the
/// same store works again afterwards, its old connections replaced.
#[tokio::test]
async fn a_server_that_goes_away_fails_closed_and_recovers() {
    let (direct, upstream) = direct().await;
    let gate = TcpGate::open(upstream).await;
    let options = direct.host("127.0.0.1").port(gate.addr.port());
    let store = MySqlStore::builder()
        .table(mysql_server::unique_table("away"))
        .acquire_timeout(Duration::from_secs(2))
        .connect_with(options)
        .await
        .unwrap();
    store.migrate().await.unwrap();
    let idem = Idempotency::new(store.clone());
    let runs = idem_conformance::Counter::default();
    let call = |key: &'static str| {
        let (idem, runs) = (idem.clone(), runs.clone());
        async move {
            idem.call("away", key)
                .run(|| async {
                    runs.bump();
                    Ok::<_, Error>(key.len())
                })
                .await
        }
    };
    assert_eq!(call("before").await.unwrap(), 6);
    assert_eq!(runs.get(), 1);

    gate.close().await;
    for key in ["down-1", "down-2", "down-3"] {
        let out = call(key).await;
        assert!(matches!(out, Err(Error::Store(_))), "{out:?}");
    }
    assert_eq!(runs.get(), 1, "a body ran without a claim");

    gate.reopen().await;
    assert_eq!(call("after").await.unwrap(), 5);
    assert_eq!(runs.get(), 2);
    // The record written before the outage is still replayed.
    assert_eq!(call("before").await.unwrap(), 6);
    assert_eq!(runs.get(), 2);

    // Sessions cut while idle (a server restart, a killed session): the
    // next steps find out, open new connections and succeed.
    for i in 0..4u32 {
        let out: Result<u32, Error> = idem.call("warm", &i).run(|| async { Ok(i) }).await;
        out.unwrap();
    }
    gate.cut();
    for i in 0..8u32 {
        let out: Result<u32, Error> = idem.call("cut", &i).run(|| async { Ok(i) }).await;
        assert_eq!(out.unwrap(), i);
    }
}

/// Environment variable that makes `race_worker` a worker.
const WORKER: &str = "IDEM_MYSQL_RACE_WORKER";
const KEYS: u32 = 1000;

/// Two replicas (OS processes) race on the same 1,000 keys through one
/// server; every body increments a counter row, so the table says how
/// often each body ran in total.
#[tokio::test]
async fn two_processes_racing_run_each_body_once() {
    let table = mysql_server::unique_table("race");
    let store = MySqlStore::builder()
        .table(table.clone())
        .connect(&mysql_server::url().await)
        .await
        .unwrap();
    store.migrate().await.unwrap();
    let mut admin = mysql_server::admin().await;
    sqlx::raw_sql(&format!(
        "CREATE TABLE `{table}_runs` (k INT PRIMARY KEY, n INT NOT NULL)"
    ))
    .execute(&mut admin)
    .await
    .unwrap();
    let started = Instant::now();
    // The workers use this process's server, a private one included.
    let url = mysql_server::url().await;
    let workers: Vec<_> = (0..2)
        .map(|_| {
            Command::new(std::env::current_exe().unwrap())
                .args(["race_worker", "--exact", "--nocapture", "--test-threads=1"])
                .env(WORKER, &table)
                .env("IDEM_TEST_MYSQL_URL", &url)
                .spawn()
                .unwrap()
        })
        .collect();
    for mut worker in workers {
        assert!(worker.wait().unwrap().success(), "a worker failed");
    }
    let elapsed = started.elapsed();
    let (rows, total, max): (i64, i64, i64) = sqlx::query_as(&format!(
        "SELECT COUNT(*), CAST(COALESCE(SUM(n), 0) AS SIGNED), CAST(COALESCE(MAX(n), 0) AS SIGNED) FROM `{table}_runs`"
    ))
    .fetch_one(&mut admin)
    .await
    .unwrap();
    println!("2 processes x {KEYS} keys in {elapsed:?}");
    assert_eq!((rows, total, max), (i64::from(KEYS), i64::from(KEYS), 1));
    sqlx::raw_sql(&format!("DROP TABLE `{table}_runs`"))
        .execute(&mut admin)
        .await
        .unwrap();
}

/// Where nothing answers at `IDEM_TEST_MYSQL_URL` (here a closed port),
/// the tests start a MariaDB of their own: a child test process so told
/// runs a call on it twice (the body once), and the server is stopped and
/// its directory removed when that process exits.
#[tokio::test]
async fn a_private_server_starts_where_none_answers() {
    let closed = mysql_server::ports::closed();
    let nowhere = format!("mysql://root@127.0.0.1:{}/test", closed.port);
    let out = Command::new(std::env::current_exe().unwrap())
        .args([
            "private_server_worker",
            "--exact",
            "--nocapture",
            "--test-threads=1",
        ])
        .env("IDEM_TEST_MYSQL_URL", &nowhere)
        .env(PRIVATE_WORKER, "1")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "the worker failed: {stdout}\n{stderr}"
    );
    assert!(stderr.contains("starting a private MariaDB"), "{stderr}");
    let line = |name: &str| {
        stdout
            .lines()
            // After "test private_server_worker ... " on the first.
            .find_map(|line| Some(line.split_once(name)?.1))
            .unwrap_or_else(|| panic!("no {name} in {stdout}"))
            .to_owned()
    };
    let (url, dir) = (line("private url: "), line("private dir: "));
    assert_ne!(url, nowhere);
    // The guardian stops the server once the worker is gone.
    let started = Instant::now();
    while <MySqlConnection as sqlx::Connection>::connect(&url)
        .await
        .is_ok()
        || std::path::Path::new(&dir).exists()
    {
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "the private MariaDB at {url} ({dir}) outlived its process"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

const PRIVATE_WORKER: &str = "IDEM_MYSQL_PRIVATE_WORKER";

/// Not a test of its own: the child of `a_private_server_starts…` (a
/// no-op unless `IDEM_MYSQL_PRIVATE_WORKER` is set).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn private_server_worker() {
    if std::env::var_os(PRIVATE_WORKER).is_none() {
        return;
    }
    let url = mysql_server::url().await;
    let store = MySqlStore::connect(&url).await.unwrap();
    store.migrate().await.unwrap();
    let idem = Idempotency::new(store);
    let runs = std::sync::atomic::AtomicU32::new(0);
    for _ in 0..2 {
        let out: u32 = idem
            .call("private", "k")
            .run(|| async {
                Ok::<_, Error>(runs.fetch_add(1, std::sync::atomic::Ordering::SeqCst))
            })
            .await
            .unwrap();
        assert_eq!(out, 0);
    }
    assert_eq!(runs.into_inner(), 1);
    let dir: String = sqlx::query_scalar("SELECT CAST(@@datadir AS CHAR)")
        .fetch_one(&mut mysql_server::admin().await)
        .await
        .unwrap();
    let dir = std::path::Path::new(&dir)
        .parent()
        .unwrap()
        .display()
        .to_string();
    println!("private url: {url}");
    println!("private dir: {dir}");
}

/// Not a test of its own: the entry point of `two_processes_racing…`'s
/// child processes (a no-op unless `IDEM_MYSQL_RACE_WORKER` is set).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn race_worker() {
    let Ok(table) = std::env::var(WORKER) else {
        return;
    };
    let store = MySqlStore::builder()
        .table(table.clone())
        .connect(&mysql_server::url().await)
        .await
        .unwrap();
    let idem = Idempotency::new(store);
    let counter = tokio::sync::Mutex::new(mysql_server::admin().await);
    let bump = format!(
        "INSERT INTO `{table}_runs` (k, n) VALUES (?, 1) ON DUPLICATE KEY UPDATE n = n + 1"
    );
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
                        .execute(&mut *counter.lock().await)
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

/// A storm of claims from two replicas (two stores, connections of their
/// own) on the same new keys, then on the same expired claims: each key
/// has exactly one winner, every other claimer hears `InProgress`, and no
/// claim fails (InnoDB's deadlock victims claim again inside the call).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_storm_of_claims_from_two_replicas_has_one_winner_per_key() {
    const KEYS: u32 = 40;
    const PER_REPLICA: usize = 12;
    let table = mysql_server::unique_table("storm");
    let url = mysql_server::url().await;
    let replica = || {
        MySqlStore::builder()
            .table(table.clone())
            .max_connections(PER_REPLICA as u32)
            .connect(&url)
    };
    let (a, b) = (replica().await.unwrap(), replica().await.unwrap());
    a.migrate().await.unwrap();
    let storm = |round: &'static str, lease: Duration| {
        let (a, b) = (a.clone(), b.clone());
        async move {
            let claims = (0..KEYS).flat_map(|k| {
                let key = RecordKey::new(round, &k);
                (0..2 * PER_REPLICA).map(move |i| (key, i))
            });
            let outcomes = futures::future::join_all(claims.map(|(key, i)| {
                let store = if i % 2 == 0 { a.clone() } else { b.clone() };
                async move { (key, store.claim(&key, &claim(lease)).await) }
            }))
            .await;
            let mut won = std::collections::HashMap::<RecordKey, Vec<bool>>::new();
            for (key, outcome) in outcomes {
                match outcome.expect("a claim failed") {
                    ClaimOutcome::Won { took_over, .. } => {
                        won.entry(key).or_default().push(took_over)
                    }
                    ClaimOutcome::InProgress { .. } => {}
                    other => panic!("{other:?}"),
                }
            }
            won
        }
    };
    // New keys: one winner each, none taking over.
    let won = storm("new", Duration::from_secs(60)).await;
    assert_eq!(won.len(), KEYS as usize);
    assert!(won.values().all(|w| w == &[false]), "{won:?}");
    // Every claim lapses (the server dates them back), then storm again.
    sqlx::query(&format!(
        "UPDATE {} SET expires_at = UTC_TIMESTAMP(6) - INTERVAL 1 SECOND",
        a.table()
    ))
    .execute(&mut mysql_server::admin().await)
    .await
    .unwrap();
    let again = storm("new", Duration::from_secs(60)).await;
    assert_eq!(again.len(), KEYS as usize);
    assert!(again.values().all(|w| w == &[true]), "{again:?}");
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
