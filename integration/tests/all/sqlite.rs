//! The conformance suite on `SqliteStore` (a temporary file per case), and
//! durability across processes: a record written by one process is
//! replayed by a second one started afterwards on the same file.

use crate::support::test_name;
use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use idem::fingerprint::Fingerprint;
use idem::key::RecordKey;
use idem::store::{Claim, ClaimOutcome, Fence, Retention, Token};
use idem::{Error, Idempotency, SqliteStore, Store};

/// A path in a fresh temporary directory. The directories stay behind in
/// the system's temporary directory (a few KiB each).
fn temp_db(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!(
        "idem-sqlite-{}-{:016x}",
        std::process::id(),
        Token::random().to_u128() as u64
    ));
    std::fs::create_dir_all(&dir).unwrap();
    dir.join(name)
}

idem_conformance::suite!(async {
    Idempotency::new(SqliteStore::open(temp_db("conformance.db")).await.unwrap())
});

/// A file at a schema version this release does not know (a later
/// release's, or a build's before 0.1) is refused, and left as it is.
#[tokio::test]
async fn open_refuses_an_unknown_schema_version() {
    let path = temp_db("unknown.db");
    SqliteStore::open(&path).await.unwrap().close().await;
    let url = format!("sqlite://{}", path.display());
    let db = sqlx::SqlitePool::connect(&url).await.unwrap();
    sqlx::query("INSERT INTO idem_migrations (version, applied_at) VALUES (4, 0)")
        .execute(&db)
        .await
        .unwrap();
    db.close().await;
    let err = SqliteStore::open(&path).await.unwrap_err().to_string();
    assert!(
        err.contains("schema version 4") && err.contains("before 0.1"),
        "{err}"
    );
    let db = sqlx::SqlitePool::connect(&url).await.unwrap();
    let versions: Vec<i64> =
        sqlx::query_scalar("SELECT version FROM idem_migrations ORDER BY version")
            .fetch_all(&db)
            .await
            .unwrap();
    assert_eq!(versions, vec![1, 4]);
}

#[tokio::test]
async fn opens_in_wal_mode_and_reopens() {
    let path = temp_db("wal.db");
    let store = SqliteStore::open(&path).await.unwrap();
    let out: Result<u8, Error> = Idempotency::new(store.clone())
        .call("s", "k")
        .run(|| async { Ok(1) })
        .await;
    assert_eq!(out.unwrap(), 1);
    store.close().await;
    let wal = path.with_extension("db-wal");
    assert!(wal.exists() || path.exists());
    let mut conn = <sqlx::SqliteConnection as sqlx::Connection>::connect(&format!(
        "sqlite://{}",
        path.display()
    ))
    .await
    .unwrap();
    let mode: String = sqlx::query_scalar("PRAGMA journal_mode")
        .fetch_one(&mut conn)
        .await
        .unwrap();
    assert_eq!(mode, "wal");
    // Opening again keeps the records (the migration is idempotent).
    let again = SqliteStore::open(&path).await.unwrap();
    let replay: Result<u8, Error> = Idempotency::new(again)
        .call("s", "k")
        .run(|| async { panic!("must replay") })
        .await;
    assert_eq!(replay.unwrap(), 1);
}

/// Closing drops the idle connections; a step after it opens a new one,
/// on the same records.
#[tokio::test]
async fn steps_after_close_open_new_connections() {
    let store = SqliteStore::open(temp_db("closed.db")).await.unwrap();
    let idem = Idempotency::new(store.clone());
    let first: Result<u8, Error> = idem.call("s", "k").run(|| async { Ok(1) }).await;
    assert_eq!(first.unwrap(), 1);
    store.close().await;
    let replay: Result<u8, Error> = idem
        .call("s", "k")
        .run(|| async { panic!("must replay") })
        .await;
    assert_eq!(replay.unwrap(), 1);
}

/// A statement that fails (a write to a file opened read-only) is a
/// `StoreError`, its connection is closed, and the next step runs on
/// another one.
#[tokio::test]
async fn a_failed_statement_leaves_the_store_usable() {
    use idem::admin::Admin;
    let path = temp_db("read-only.db");
    SqliteStore::open(&path).await.unwrap().close().await;
    let options = sqlx::sqlite::SqliteConnectOptions::new()
        .filename(&path)
        .read_only(true);
    let store = SqliteStore::open_existing(options).await.unwrap();
    let key = RecordKey::new("s", "k");
    let claim = Claim::new(
        Token::random(),
        Fingerprint::NONE,
        Duration::from_secs(60),
        "t",
    );
    for _ in 0..6 {
        let err = store.claim(&key, &claim).await.unwrap_err().to_string();
        assert!(err.contains("readonly"), "{err}");
        assert_eq!(store.stats().await.unwrap().in_progress, 0);
    }
}

#[tokio::test]
async fn purge_expired_deletes_only_expired_rows() {
    let store = SqliteStore::open(temp_db("purge.db")).await.unwrap();
    let short = Duration::from_secs(1);
    let started = std::time::Instant::now();
    for i in 0..40u32 {
        let life = if i % 4 == 0 {
            Duration::from_secs(60)
        } else {
            short
        };
        let key = RecordKey::new("purge", &i);
        let claim = Claim::new(Token::random(), Fingerprint::NONE, life, "sqlite-test");
        assert!(matches!(
            store.claim(&key, &claim).await.unwrap(),
            ClaimOutcome::Won { .. }
        ));
        if i % 2 == 0 {
            assert_eq!(
                store
                    .complete(&key, claim.token, b"r", Retention::new(life))
                    .await
                    .unwrap(),
                Fence::Held
            );
        } else {
            // A recovery point of the claim, expiring with it.
            let step = idem::store::StepId::new(&"s");
            let saved = store.save_step(&key, claim.token, step, b"v", life);
            assert_eq!(saved.await.unwrap(), Fence::Held);
        }
    }
    assert_eq!(store.purge_expired().await.unwrap(), 0);
    assert!(started.elapsed() < short, "too slow to test");
    // Every short row expires within `short` of its own write, which
    // ended by now.
    let written = std::time::Instant::now();
    tokio::time::sleep_until((written + short + Duration::from_millis(100)).into()).await;
    // The 10 short records and the 20 steps of the odd (short) claims;
    // the 20 lapsed claims stay a day (`LAPSED_CLAIM_KEPT`), the evidence
    // that the next call is a takeover (and reconciles).
    assert_eq!(store.purge_expired().await.unwrap(), 10 + 20);
    assert_eq!(store.purge_expired().await.unwrap(), 0);
    let retry = Claim::new(Token::random(), Fingerprint::NONE, short, "sqlite-test");
    let lapsed = RecordKey::new("purge", &1u32);
    assert!(matches!(
        store.claim(&lapsed, &retry).await.unwrap(),
        ClaimOutcome::Won {
            took_over: true,
            ..
        }
    ));
}

const WORKER: &str = "IDEM_SQLITE_WORKER";

/// Process one runs the body and exits; process two, started afterwards
/// on the same file, replays the value without running the body.
#[test]
fn a_record_written_by_one_process_is_replayed_by_the_next() {
    let path = temp_db("two-processes.db");
    let run = |role: &str| {
        let out = Command::new(std::env::current_exe().unwrap())
            .args([
                test_name(module_path!(), "sqlite_worker").as_str(),
                "--exact",
                "--nocapture",
                "--test-threads=1",
            ])
            .env(WORKER, format!("{role}:{}", path.display()))
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        assert!(
            out.status.success(),
            "{role}: {stdout}{}",
            String::from_utf8_lossy(&out.stderr)
        );
        stdout
            .lines()
            .find_map(|line| line.split_once("RESULT ").map(|(_, result)| result))
            .unwrap_or_else(|| panic!("{role} printed no result: {stdout}"))
            .to_owned()
    };
    let first = run("first");
    let second = run("second");
    assert!(first.starts_with("ran "), "{first}");
    assert_eq!(second, first.replacen("ran ", "replayed ", 1));
}

/// Not a test of its own: the entry point of the processes that
/// `a_record_written_by_one_process…` starts (a no-op unless
/// `IDEM_SQLITE_WORKER` is set).
#[tokio::test]
async fn sqlite_worker() {
    let Ok(spec) = std::env::var(WORKER) else {
        return;
    };
    let (role, path) = spec.split_once(':').unwrap();
    let store = SqliteStore::open(path).await.unwrap();
    let idem = Idempotency::new(store);
    let pid = std::process::id();
    let out = idem
        .call("jobs", "job-1")
        .run_reported(|| async {
            assert_eq!(role, "first", "the second process ran the body");
            Ok::<_, Error>(format!("value from pid {pid}"))
        })
        .await;
    let value = out.result.unwrap();
    let how = if out.replayed { "replayed" } else { "ran" };
    println!("\nRESULT {how} {value}");
}

/// The file deleted, then replaced, under an open store: claims fail
/// closed with a message that says so, and no body runs; a store opened on
/// the new file works.
#[tokio::test]
async fn a_deleted_or_replaced_file_fails_closed() {
    let path = temp_db("vanished");
    let store = SqliteStore::open(&path).await.unwrap();
    let idem = Idempotency::new(store);
    let first: Result<u8, Error> = idem.call("s", "k1").run(|| async { Ok(1) }).await;
    assert_eq!(first.unwrap(), 1);

    for suffix in ["", "-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{}{suffix}", path.display()));
    }
    let out: Result<u8, Error> = idem
        .call("s", "k2")
        .run(|| async { panic!("ran without a store that others can see") })
        .await;
    let Err(Error::Store(err)) = out else {
        panic!("{out:?}")
    };
    assert!(err.to_string().contains("deleted"), "{err}");

    // Another process (here: another store) creates a new file at the path.
    let newcomer = Idempotency::new(SqliteStore::open(&path).await.unwrap());
    let fresh: Result<u8, Error> = newcomer.call("s", "k1").run(|| async { Ok(2) }).await;
    assert_eq!(fresh.unwrap(), 2);
    let out: Result<u8, Error> = idem
        .call("s", "k3")
        .run(|| async { panic!("ran on a replaced file") })
        .await;
    let Err(Error::Store(err)) = out else {
        panic!("{out:?}")
    };
    assert!(err.to_string().contains("replaced"), "{err}");
}
