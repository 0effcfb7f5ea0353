//! The conformance suite on `MySqlStore` (run here on MariaDB), the SQL
//! cases it shares with `PostgresStore` (`support/sql/`), and what is
//! particular to it: databases and names, hostile keys, fencing by the
//! server's clock, a server that goes away or never answers, a private
//! server, a storm of claims from two replicas.
//!
//! Needs a MySQL or MariaDB server: see `support/mysql_server.rs`.

use crate::support::mysql_server;
use crate::support::sql;
use crate::support::sql_mysql;
use crate::support::tcp_gate;
use crate::support::test_name;

use std::process::Command;
use std::time::{Duration, Instant};

use idem::admin::{Admin, ListFilter, Purged, RecordState};
use idem::key::RecordKey;
use idem::store::{Claim, ClaimOutcome, Fence, Retention, StepId};
use idem::{Error, Idempotency, MySqlStore, Store};
use sql::{SqlServer, admin as cases, faults};
use sql_mysql::MySqlServer as My;
use sqlx::mysql::MySqlConnection;
use tcp_gate::TcpGate;

idem_conformance::suite!(async { Idempotency::new(store("conf").await) });

// Each as a test of its own, named after it.
sql::store_cases!(My, unknown_version = 6);

/// A store on a table of its own, migrated.
async fn store(test: &str) -> MySqlStore {
    sql::store::<My>(test).await
}

fn claim(lease: Duration) -> Claim {
    sql::claim::<My>(lease)
}

async fn count(table: &str) -> i64 {
    My::count(table).await
}

#[tokio::test]
async fn migrate_twice_and_concurrently_is_harmless() {
    let url = mysql_server::url().await;
    let table = mysql_server::unique_table("migrate");
    let replica = async || MySqlStore::builder().table(&table).connect(&url).await;
    let quoted = format!("`{table}`");
    let stores = cases::migrate_twice_and_concurrently_is_harmless::<My>(replica, &quoted).await;
    // MySQL commits each DDL statement on its own: a run that stopped
    // before recording its version runs every statement again without
    // failing, and keeps the records.
    My::execute(&format!(
        "DELETE FROM `{table}_migrations` WHERE version = 1"
    ))
    .await;
    stores[2].migrate().await.unwrap();
    assert_eq!(count(&quoted).await, 1);
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
    assert_eq!(a.table(), format!("`{database}`.`{base}_pay`"));
    cases::two_tables_are_two_records::<My>(&a, &b).await;
    let long = "t".repeat(54);
    let bad = ["x`; DROP TABLE y; --", "", "1abc", "a b", &long];
    cases::bad_table_names_are_refused::<My>(&bad).await;
    let err = MySqlStore::builder()
        .database("te`st")
        .connect(&url)
        .await
        .unwrap_err();
    assert!(err.to_string().contains("invalid database name"), "{err}");
}

/// The server goes away (its port closed, every connection cut) and comes
/// back: calls fail with `Error::Store` and run no body meanwhile, and the
/// same store works again afterwards, its old connections replaced.
#[tokio::test]
async fn a_server_that_goes_away_fails_closed_and_recovers() {
    let direct = sql::options::<My>().await;
    let gate = TcpGate::open(My::upstream(&direct)).await;
    let store = MySqlStore::builder()
        .table(mysql_server::unique_table("away"))
        .acquire_timeout(Duration::from_secs(2))
        .connect_with(My::via(direct, gate.addr.port()))
        .await
        .unwrap();
    store.migrate().await.unwrap();
    let idem = Idempotency::new(store);
    let (down, up) = (async || gate.close().await, async || gate.reopen().await);
    faults::an_outage_fails_closed_and_recovers(&idem, down, up).await;
    // Sessions cut while idle (a server restart, a killed session): the
    // next steps find out, open new connections and succeed.
    faults::cut_sessions_are_replaced_transparently(&idem, async || gate.cut()).await;
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
    assert_eq!(count(store.table()).await, keys.len() as i64);
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
            test_name(module_path!(), "private_server_worker").as_str(),
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
