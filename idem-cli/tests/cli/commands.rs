//! The `idem` binary, run as a process against real stores: records the
//! library wrote are listed, a stuck claim is found, `forget` lets the key
//! run again, `purge` removes expired records, `stats` counts them, and
//! bad input fails clearly with a non-zero exit.
//!
//! Servers: see integration/tests/all/support/pg_server.rs, redis_server.rs
//! and mysql_server.rs (the machine's, else private ones these tests
//! start).

use std::process::{Command, Output};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use idem::fingerprint::Fingerprint;
use idem::key::RecordKey;
use idem::store::{Claim, ClaimOutcome, Token};
use idem::{Error, Idempotency, MySqlStore, PostgresStore, RedisStore, SqliteStore, Store};
use serde_json::{Value, json};

use crate::{mysql_server, pg_server, redis_server};

/// Runs `idem` with `args`; its exit code, stdout and stderr.
pub(crate) fn run(args: &[&str]) -> (i32, String, String) {
    let Output {
        status,
        stdout,
        stderr,
    } = Command::new(env!("CARGO_BIN_EXE_idem"))
        .args(args)
        .env_remove("IDEM_REDIS_URL")
        .env_remove("IDEM_POSTGRES_URL")
        .env_remove("IDEM_MYSQL_URL")
        .env_remove("IDEM_DYNAMODB_TABLE")
        .env_remove("AWS_ENDPOINT_URL")
        .env_remove("AWS_SESSION_TOKEN")
        // The emulators' static credentials (`--dynamodb` needs some).
        .env("AWS_REGION", "us-east-1")
        .env("AWS_ACCESS_KEY_ID", "test")
        .env("AWS_SECRET_ACCESS_KEY", "test")
        .output()
        .expect("run idem");
    (
        status.code().expect("exited"),
        String::from_utf8(stdout).unwrap(),
        String::from_utf8(stderr).unwrap(),
    )
}

/// `idem … --json`, which must succeed; its JSON.
pub(crate) fn idem_json(store: &[&str], args: &[&str]) -> Value {
    let all: Vec<&str> = store
        .iter()
        .chain(args)
        .chain(&["--json"])
        .copied()
        .collect();
    let (code, out, err) = run(&all);
    assert_eq!(code, 0, "idem {all:?} failed: {err}");
    serde_json::from_str(&out).unwrap_or_else(|e| panic!("not JSON ({e}): {out}"))
}

#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
struct Receipt {
    order: String,
    cents: u64,
}

/// Counts the runs of `charge`.
#[derive(Clone, Default)]
struct Runs(Arc<AtomicUsize>);

async fn charge(idem: &Idempotency, runs: &Runs, scope: &str, order: &str) -> Receipt {
    let site = idem::call_site!("shop::charge");
    let out: Result<Receipt, Error> = idem
        .call(scope, order)
        .site(site)
        .run(|| async {
            runs.0.fetch_add(1, Ordering::SeqCst);
            Ok(Receipt {
                order: order.to_owned(),
                cents: 1200,
            })
        })
        .await;
    out.unwrap()
}

/// A claim won and never completed: a body that hangs (its lease
/// renewed) or a holder that died with a long lease.
async fn stuck_claim(store: &dyn Store, scope: &str, key: &str) -> RecordKey {
    let record = RecordKey::new(scope, key);
    let claim = Claim::new(
        Token::random(),
        Fingerprint::NONE,
        Duration::from_secs(3600),
        "shop::ship",
    );
    let won = store.claim(&record, &claim).await.unwrap();
    assert!(matches!(won, ClaimOutcome::Won { .. }));
    record
}

/// `list --in-progress --older-than 1h` finds `stuck` (claimed two hours
/// ago at the site `shop::ship`) and nothing else.
fn assert_lists_only_the_stuck_claim(target: &[&str], stuck: &RecordKey) {
    let listed = idem_json(target, &["list", "--in-progress", "--older-than", "1h"]);
    assert_eq!(keys_of(&listed), [stuck.to_hex()]);
    assert_eq!(listed[0]["site"], "shop::ship");
    assert!(listed[0]["age_ms"].as_u64().unwrap() >= 7_200_000);
}

/// A claim whose lease ran out without a result is `lapsed` on every
/// store: listed and inspected so, with no time left, counted apart, and
/// neither listed nor counted as in progress. (Redis, which keeps such a
/// claim a day, showed it in progress, "EXPIRES IN 0s"; the SQL stores
/// called it `expired`, the word for a result past its TTL.) Assumes no
/// other claim of the store has lapsed.
pub(crate) async fn a_lapsed_claim_shows_as_lapsed(target: &[&str], store: &dyn Store) {
    let record = RecordKey::new("lapse", "o-1");
    let claim = Claim::new(
        Token::random(),
        Fingerprint::NONE,
        Duration::from_millis(300),
        "shop::lapse",
    );
    let won = store.claim(&record, &claim).await.unwrap();
    assert!(matches!(won, ClaimOutcome::Won { .. }));
    tokio::time::sleep(Duration::from_millis(600)).await;
    let hex = record.to_hex();

    let listed = idem_json(target, &["list"]);
    let row = listed
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["key"] == hex.as_str())
        .unwrap_or_else(|| panic!("{hex} not in {listed}"));
    assert_eq!(row["state"], "lapsed", "{row}");
    assert_eq!(row["expires_in_ms"], Value::Null, "{row}");
    let (code, table, _) = run(&[target, &["list"]].concat());
    assert_eq!(code, 0);
    let line = table.lines().find(|l| l.starts_with(&hex)).unwrap();
    assert!(line.contains("lapsed"), "{line}");
    let inspected = idem_json(target, &["inspect", "--record", &hex]);
    assert_eq!(inspected["state"], "lapsed", "{inspected}");

    let in_progress = keys_of(&idem_json(target, &["list", "--in-progress"]));
    assert!(!in_progress.contains(&hex), "{in_progress:?}");
    let stats = idem_json(target, &["stats"]);
    assert_eq!(stats["lapsed"], 1, "{stats}");
    assert_eq!(
        stats["in_progress"].as_u64(),
        Some(in_progress.len() as u64),
        "{stats}"
    );
    let (code, text, _) = run(&[target, &["stats"]].concat());
    assert_eq!(code, 0);
    assert!(text.contains("lapsed       1"), "{text}");
}

pub(crate) fn keys_of(list: &Value) -> Vec<String> {
    let list = list.as_array().expect("an array");
    list.iter()
        .map(|r| r["key"].as_str().unwrap().to_owned())
        .collect()
}

/// What every store shares: the records written are listed, inspected,
/// counted, and `forget` makes the next call run.
pub(crate) async fn lists_inspects_counts_and_forgets(
    target: &[&str],
    idem: &Idempotency,
    scope: &str,
) {
    let runs = Runs::default();
    for order in ["o-1", "o-2"] {
        charge(idem, &runs, scope, order).await;
    }
    let stuck = stuck_claim(idem.store().as_ref(), scope, "o-3").await;

    let listed = keys_of(&idem_json(target, &["list"]));
    for key in [
        RecordKey::new(scope, "o-1"),
        RecordKey::new(scope, "o-2"),
        stuck,
    ] {
        assert!(listed.contains(&key.to_hex()), "{key:?} not in {listed:?}");
    }
    let claims = keys_of(&idem_json(target, &["list", "--in-progress"]));
    assert!(claims.contains(&stuck.to_hex()), "{claims:?}");
    assert!(!claims.contains(&RecordKey::new(scope, "o-1").to_hex()));

    // Human output: a table with the key and the state.
    let (code, table, _) = run(&[target, &["list", "--in-progress"]].concat());
    assert_eq!(code, 0);
    assert!(table.starts_with("KEY"), "{table}");
    let row = table
        .lines()
        .find(|l| l.starts_with(&stuck.to_hex()))
        .unwrap();
    assert!(row.contains("in_progress"), "{row}");

    let inspected = idem_json(target, &["inspect", "--scope", scope, "--key", "o-1"]);
    assert_eq!(inspected["state"], "completed");
    assert_eq!(inspected["value"]["kind"], "ok");
    assert_eq!(
        inspected["value"]["json"],
        json!({ "order": "o-1", "cents": 1200 })
    );
    assert!(inspected["size"].as_u64().unwrap() > 0);
    assert!(inspected["expires_in_ms"].as_u64().unwrap() > 0);
    assert_eq!(inspected["fingerprint"].as_str().unwrap().len(), 64);
    let (code, text, _) = run(&[target, &["inspect", "--scope", scope, "--key", "o-1"]].concat());
    assert_eq!(code, 0);
    assert!(text.contains("state        completed"), "{text}");
    assert!(text.contains("\"cents\": 1200"), "{text}");

    // Forget: the next call runs again; forgetting the stuck claim by its
    // hashed key frees it too.
    assert_eq!(runs.0.load(Ordering::SeqCst), 2);
    charge(idem, &runs, scope, "o-1").await;
    assert_eq!(runs.0.load(Ordering::SeqCst), 2, "replayed before forget");
    idem_json(target, &["forget", "--scope", scope, "--key", "o-1"]);
    charge(idem, &runs, scope, "o-1").await;
    assert_eq!(runs.0.load(Ordering::SeqCst), 3, "ran again after forget");
    idem_json(target, &["forget", "--record", &stuck.to_hex()]);
    charge(idem, &runs, scope, "o-3").await;
    assert_eq!(runs.0.load(Ordering::SeqCst), 4, "the stuck key ran");

    // A key with no record: inspect says so (exit 1), forget is fine.
    let (code, _, err) = run(&[target, &["inspect", "--scope", scope, "--key", "nope"]].concat());
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("no record under"), "{err}");
    idem_json(target, &["forget", "--scope", scope, "--key", "nope"]);
}

/// Bad input: clear messages, non-zero exits, before any store is used.
#[test]
fn bad_arguments_and_unreachable_stores_fail_clearly() {
    let (code, _, err) = run(&["list"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("--redis") && err.contains("--sqlite"), "{err}");

    let missing = "/nonexistent/idem.db";
    // Each: the arguments, the exit code, what the message names.
    let cases: [(&[&str], i32, &str); 8] = [
        (
            &["--sqlite", "a.db", "--redis", "redis://x", "stats"],
            2,
            "cannot be used with",
        ),
        (
            &["--sqlite", missing, "inspect", "--record", "xyz"],
            2,
            "64 hex digits",
        ),
        (
            &["--sqlite", missing, "inspect", "--scope", "s"],
            2,
            "--key",
        ),
        (
            &["--sqlite", "x.db", "list", "--older-than", "soon"],
            2,
            "--older-than",
        ),
        (
            &["--sqlite", missing, "stats"],
            3,
            "/nonexistent/idem.db: no such file",
        ),
        // Nothing listens on port 1.
        (
            &["--postgres", "postgres://idem@127.0.0.1:1/idem", "stats"],
            3,
            "PostgreSQL at postgres://idem@127.0.0.1:1/idem",
        ),
        (
            &["--mysql", "mysql://idem@127.0.0.1:1/idem", "stats"],
            3,
            "MySQL at mysql://idem@127.0.0.1:1/idem",
        ),
        (
            &["--redis", "redis://127.0.0.1:1", "stats"],
            3,
            "Redis at redis://127.0.0.1:1",
        ),
    ];
    for (args, want_code, says) in cases {
        let (code, _, err) = run(args);
        assert_eq!(code, want_code, "{args:?}: {err}");
        assert!(err.contains(says), "{args:?}: {err}");
    }
}

fn temp_db(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!(
        "idem-cli-{name}-{:x}",
        Token::random().to_u128() as u64
    ));
    std::fs::create_dir_all(&dir).unwrap();
    dir.join("idem.db")
}

/// `idem list | head -1`: the reader takes one line and closes the pipe
/// while `idem` still writes (the listing is larger than a pipe holds).
/// `idem` ends quietly with 0, as other Unix tools do; `print!` panicked
/// ("failed printing to stdout: Broken pipe", exit 101).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reader_that_stops_early_ends_the_listing_quietly() {
    use std::io::BufRead as _;
    use std::process::Stdio;

    let path = temp_db("pipe");
    let idem = Idempotency::new(SqliteStore::open(&path).await.unwrap());
    // About 100 bytes a row: 2000 rows are three times a 64 KiB pipe.
    for n in 0..2000 {
        let out: Result<u32, Error> = idem
            .call("pipe", &format!("o-{n}"))
            .run(|| async move { Ok(n) })
            .await;
        out.unwrap();
    }
    let mut child = Command::new(env!("CARGO_BIN_EXE_idem"))
        .args([
            "--sqlite",
            path.to_str().unwrap(),
            "list",
            "--limit",
            "5000",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run idem");
    let mut first = String::new();
    std::io::BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut first)
        .unwrap();
    // The reader is dropped: the pipe's only read end is closed.
    assert!(first.starts_with("KEY"), "{first}");
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{:?}: {stderr}", out.status);
    assert!(stderr.is_empty(), "{stderr}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite() {
    let path = temp_db("sqlite");
    let store = SqliteStore::open(&path).await.unwrap();
    let idem = Idempotency::new(store.clone());
    let path_arg = path.to_str().unwrap();
    let target = ["--sqlite", path_arg];
    lists_inspects_counts_and_forgets(&target, &idem, "shop").await;
    crate::http_records::found_from_what_the_client_knows(&target, &idem).await;

    let db = sqlx::SqlitePool::connect(&format!("sqlite://{path_arg}"))
        .await
        .unwrap();
    let statements = [
        "UPDATE idem_records SET created_at = created_at - 7200000 WHERE key = ?1",
        "UPDATE idem_records SET expires_at = expires_at - 172800000 WHERE key = ?1",
    ];
    stuck_then_expired(&target, &store, statements, async |sql, key| {
        sqlx::query(sql).bind(key).execute(&db).await.unwrap();
    })
    .await;
    a_lapsed_claim_shows_as_lapsed(&target, &store).await;
}

/// What follows the records in every SQL store: a claim made two hours
/// ago (`statements[0]`, run by `run` with its key, moves its creation
/// back) is listed as stuck and one just made is not; then its lease
/// lapses (`statements[1]`), it is counted so, and is purged.
pub(crate) async fn stuck_then_expired(
    target: &[&str],
    store: &dyn Store,
    statements: [&str; 2],
    run: impl AsyncFn(&str, &[u8]),
) {
    let old = stuck_claim(store, "ship", "old").await;
    let fresh = stuck_claim(store, "ship", "fresh").await;
    run(statements[0], &old.as_bytes()[..]).await;
    assert_lists_only_the_stuck_claim(target, &old);
    assert!(
        !keys_of(&idem_json(target, &["list", "--older-than", "1h"])).contains(&fresh.to_hex())
    );
    // A claim that lapsed two days ago: counted, then purged (a purge
    // keeps a lapsed claim `LAPSED_CLAIM_KEPT`, a day).
    lapse_and_purge(target, || run(statements[1], &old.as_bytes()[..])).await;
}

/// A record past its TTL whose tombstone stands lists as `tombstone`,
/// counts apart, keeps answering `Expired` after a purge dropped its value,
/// and is purged once the tombstone has passed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_tombstones() {
    let path = temp_db("tombstone");
    let idem = Idempotency::new(SqliteStore::open(&path).await.unwrap());
    let path_arg = path.to_str().unwrap();
    let target = ["--sqlite", path_arg];
    let pay = || {
        idem.call("tomb", "o-1")
            .ttl(Duration::from_secs(60))
            .tombstone(Duration::from_secs(3600))
            .run(|| async { Ok::<_, Error>("charged".to_owned()) })
    };
    pay().await.unwrap();
    let db = sqlx::SqlitePool::connect(&format!("sqlite://{path_arg}"))
        .await
        .unwrap();
    sqlx::query("UPDATE idem_records SET expires_at = expires_at - 120000")
        .execute(&db)
        .await
        .unwrap();
    let listed = idem_json(&target, &["list"]);
    assert_eq!(listed[0]["state"], "tombstone", "{listed}");
    let stats = idem_json(&target, &["stats"]);
    assert_eq!(
        (stats["tombstones"].as_u64(), stats["expired"].as_u64()),
        (Some(1), Some(0))
    );
    let purged = idem_json(&target, &["purge"]);
    assert_eq!(purged, json!({ "purged": 0, "steps": 0, "tombstones": 1 }));
    let inspected = idem_json(&target, &["inspect", "--scope", "tomb", "--key", "o-1"]);
    assert_eq!(
        (inspected["state"].as_str(), inspected["size"].as_u64()),
        (Some("tombstone"), Some(0))
    );
    assert!(matches!(pay().await, Err(Error::Expired { .. })));
    sqlx::query("UPDATE idem_records SET tombstone_until = tombstone_until - 7200000")
        .execute(&db)
        .await
        .unwrap();
    assert_eq!(idem_json(&target, &["purge"])["purged"], 1);
    assert_eq!(pay().await.unwrap(), "charged");
}

/// Counts before and after one claim's lease lapses, then purges it.
async fn lapse_and_purge<F, Fut>(target: &[&str], lapse: F)
where
    F: FnOnce() -> Fut,
    Fut: Future<Output = ()>,
{
    let before = idem_json(target, &["stats"]);
    assert_eq!(
        (before["expired"].as_u64(), before["lapsed"].as_u64()),
        (Some(0), Some(0)),
        "{before}"
    );
    assert_eq!(before["in_progress"], 2, "{before}");
    assert_eq!(before["completed"], 3, "{before}");
    assert_eq!(before["total"], 5, "{before}");
    assert!(before["bytes"].as_u64().unwrap() > 0);
    lapse().await;
    let after = idem_json(target, &["stats"]);
    assert_eq!(
        (
            after["lapsed"].as_u64(),
            after["expired"].as_u64(),
            after["in_progress"].as_u64()
        ),
        (Some(1), Some(0), Some(1)),
        "{after}"
    );
    let lapsed = idem_json(target, &["list"]);
    assert!(
        lapsed
            .as_array()
            .unwrap()
            .iter()
            .any(|r| r["state"] == "lapsed"),
        "{lapsed}"
    );
    assert_eq!(idem_json(target, &["purge"])["purged"], 1);
    let purged = idem_json(target, &["stats"]);
    assert_eq!(
        (purged["lapsed"].as_u64(), purged["total"].as_u64()),
        (Some(0), Some(4))
    );
    let (code, out, _) = run(&[target, &["stats"]].concat());
    assert_eq!(code, 0);
    assert!(out.contains("total        4"), "{out}");
}

/// The CLI on a SQL store at `target`: what `store` wrote is listed,
/// inspected, counted and forgotten; then a stuck claim and an expired
/// record, dated back by `statements` (run by `run` with their key).
async fn a_sql_store(
    target: &[&str],
    store: impl Store + Clone + 'static,
    statements: [String; 2],
    run: impl AsyncFn(&str, &[u8]),
) {
    let idem = Idempotency::new(store.clone());
    lists_inspects_counts_and_forgets(target, &idem, "shop").await;
    crate::http_records::found_from_what_the_client_knows(target, &idem).await;
    let statements = statements.each_ref().map(String::as_str);
    stuck_then_expired(target, &store, statements, run).await;
    a_lapsed_claim_shows_as_lapsed(target, &store).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres() {
    let url = pg_server::url().await;
    let schema = pg_server::unique_schema("cli");
    let store = PostgresStore::builder()
        .schema(schema.clone())
        .connect(&url)
        .await
        .unwrap();
    store.migrate().await.unwrap();
    let target = ["--postgres", &url, "--schema", &schema];
    let db = sqlx::PgPool::connect(&url).await.unwrap();
    let table = format!("\"{schema}\".idem_records");
    let statements = [
        format!("UPDATE {table} SET created_at = created_at - interval '2 hours' WHERE key = $1"),
        format!("UPDATE {table} SET expires_at = expires_at - interval '2 days' WHERE key = $1"),
    ];
    let date_back = async |sql: &str, key: &[u8]| {
        sqlx::query(sql).bind(key).execute(&db).await.unwrap();
    };
    a_sql_store(&target, store, statements, date_back).await;
    // A table name the store does not have: a clear store error.
    let (code, _, err) = run(&[
        "--postgres",
        &url,
        "--schema",
        &schema,
        "--table",
        "nope",
        "stats",
    ]);
    assert_eq!(code, 3, "{err}");
    assert!(err.contains("nope"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mysql() {
    let url = mysql_server::url().await;
    let table = mysql_server::unique_table("cli");
    let store = MySqlStore::builder()
        .table(table.clone())
        .connect(&url)
        .await
        .unwrap();
    store.migrate().await.unwrap();
    let target = ["--mysql", &url, "--table", &table];
    let db = sqlx::MySqlPool::connect(&url).await.unwrap();
    let statements = [
        format!("UPDATE `{table}` SET created_at = created_at - INTERVAL 2 HOUR WHERE `key` = ?"),
        format!("UPDATE `{table}` SET expires_at = expires_at - INTERVAL 2 DAY WHERE `key` = ?"),
    ];
    let date_back = async |sql: &str, key: &[u8]| {
        sqlx::query(sql).bind(key).execute(&db).await.unwrap();
    };
    a_sql_store(&target, store, statements, date_back).await;
    // A table name the database does not have: a clear store error.
    let (code, _, err) = run(&["--mysql", &url, "--table", "nope", "stats"]);
    assert_eq!(code, 3, "{err}");
    assert!(
        err.contains("`nope`") && err.contains("no idem table"),
        "{err}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis() {
    let url = redis_server::url().await;
    let prefix = format!("idem-cli-{:x}:", Token::random().to_u128() as u64);
    let store = RedisStore::builder()
        .prefix(&prefix)
        .connect(&url)
        .await
        .unwrap();
    let idem = Idempotency::new(store.clone());
    let target = ["--redis", &url, "--prefix", &prefix];
    lists_inspects_counts_and_forgets(&target, &idem, "shop").await;
    crate::http_records::found_from_what_the_client_knows(&target, &idem).await;

    // A claim keeps its time and site: a stuck one is found by age. Its
    // time is set two hours back, as a claim made then would carry it.
    let claim = stuck_claim(&store, "ship", "claim").await;
    let fresh = stuck_claim(&store, "ship", "fresh").await;
    let two_hours_ago = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
        - 7_200_000;
    let mut conn = redis::Client::open(url.as_str())
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap();
    let _: i64 = redis::cmd("SETRANGE")
        .arg(store.redis_key(&claim))
        .arg(49)
        .arg(&two_hours_ago.to_be_bytes()[..])
        .query_async(&mut conn)
        .await
        .unwrap();
    assert_lists_only_the_stuck_claim(&target, &claim);
    let mut in_progress = keys_of(&idem_json(&target, &["list", "--in-progress"]));
    in_progress.sort();
    let mut both = vec![claim.to_hex(), fresh.to_hex()];
    both.sort();
    assert_eq!(in_progress, both);
    idem.forget_record(&fresh).await.unwrap();
    let stats = idem_json(&target, &["stats"]);
    assert_eq!(
        (stats["in_progress"].as_u64(), stats["completed"].as_u64()),
        (Some(1), Some(3)),
        "{stats}"
    );
    // Redis expires records itself: nothing to purge.
    assert_eq!(idem_json(&target, &["purge"])["purged"], 0);
    a_lapsed_claim_shows_as_lapsed(&target, &store).await;
}
