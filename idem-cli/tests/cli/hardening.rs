//! What probing the CLI found (issue 37), each against the real binary and
//! real stores: passwords never printed, files and tables never changed,
//! exact values shown as stored, store flags anywhere, `--record`
//! prefixes, HTTP responses shown as responses, `purge` counting steps
//! apart, `forget` all or nothing.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use idem::key::RecordKey;
use idem::store::Token;
use idem::{Error, Idempotency, SqliteStore};
use serde_json::{Value, json};

use crate::{mysql_server, pg_server};

/// Runs `idem` with `args` and the environment `env`; exit code, stdout,
/// stderr.
fn run_env(args: &[&str], env: &[(&str, &str)]) -> (i32, String, String) {
    let mut command = Command::new(env!("CARGO_BIN_EXE_idem"));
    command
        .args(args)
        .env_remove("IDEM_REDIS_URL")
        .env_remove("IDEM_POSTGRES_URL")
        .env_remove("IDEM_MYSQL_URL");
    for (name, value) in env {
        command.env(name, value);
    }
    let out = command.output().expect("run idem");
    (
        out.status.code().expect("exited"),
        String::from_utf8(out.stdout).unwrap(),
        String::from_utf8(out.stderr).unwrap(),
    )
}

fn run(args: &[&str]) -> (i32, String, String) {
    run_env(args, &[])
}

/// `idem args…`, which must succeed with JSON.
fn json_of(args: &[&str]) -> Value {
    let (code, out, err) = run(args);
    assert_eq!(code, 0, "idem {args:?}: {err}");
    serde_json::from_str(&out).unwrap_or_else(|e| panic!("not JSON ({e}): {out}"))
}

fn temp_path(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!(
        "idem-cli37-{name}-{:x}",
        Token::random().to_u128() as u64
    ));
    std::fs::create_dir_all(&dir).unwrap();
    dir.join("app.db")
}

/// A store's URL with a password, given every way the CLI takes one.
fn assert_password_never_shown(flag: &str, variable: &str, url: &str, password: &str) {
    let via_flag = |args: &[&str]| run(&[&[flag, url][..], args].concat());
    let via_env = |args: &[&str]| run_env(args, &[(variable, url)]);
    for args in [
        &["stats"][..],
        &["stats", "--json"],
        &["list", "--json"],
        &["--json", "purge"],
    ] {
        for (code, out, err) in [via_flag(args), via_env(args)] {
            assert_eq!(code, 3, "{args:?}: {err}");
            let all = format!("{out}{err}");
            assert!(
                !all.contains(password),
                "{args:?} showed the password: {all}"
            );
            assert!(all.contains("***"), "{args:?}: the URL, masked: {all}");
        }
    }
    // After the command too, and in the help of a bad invocation.
    let (code, out, err) = run(&["stats", flag, url]);
    assert_eq!(code, 3, "{err}");
    assert!(!format!("{out}{err}").contains(password), "{err}");
    let (_, out, err) = run_env(&["--help"], &[(variable, url)]);
    assert!(!format!("{out}{err}").contains(password), "{out}");
}

/// Item 1: Redis and PostgreSQL URLs, unreachable and refused by a real
/// server, by flag and by variable, plain and `--json`: the password is
/// never printed.
#[tokio::test]
async fn store_passwords_are_never_printed() {
    let redis_pw = "Sup3rSecretPw";
    // Nothing listens on port 1; 6379 refuses the password.
    for url in [
        format!("redis://:{redis_pw}@127.0.0.1:1/"),
        format!("redis://:{redis_pw}@127.0.0.1:6379/"),
        format!("redis://default:{redis_pw}@127.0.0.1:1/?protocol=resp3"),
    ] {
        assert_password_never_shown("--redis", "IDEM_REDIS_URL", &url, redis_pw);
    }
    let pg_pw = "Pg5ecretPw";
    for url in [
        format!("postgres://u:{pg_pw}@127.0.0.1:1/x"),
        // A role the server refuses.
        format!("postgres://nobody_idem:{pg_pw}@127.0.0.1:5432/test"),
        format!("postgres://u@127.0.0.1:1/x?sslmode=disable&password={pg_pw}"),
    ] {
        assert_password_never_shown("--postgres", "IDEM_POSTGRES_URL", &url, pg_pw);
    }
    let my_pw = "My5ecretPw";
    // A user the server refuses, on the tests' MySQL or MariaDB.
    let refused = mysql_server::url().await.replacen(
        "mysql://root@",
        &format!("mysql://nobody_idem:{my_pw}@"),
        1,
    );
    assert!(refused.contains(my_pw), "{refused}");
    for url in [
        format!("mysql://u:{my_pw}@127.0.0.1:1/x"),
        refused,
        format!("mariadb://u:{my_pw}@127.0.0.1:1/x?ssl-mode=disabled"),
    ] {
        assert_password_never_shown("--mysql", "IDEM_MYSQL_URL", &url, my_pw);
    }
    // The issue's own two-letter password, and a URL that does not parse.
    let (code, _, err) = run(&["--postgres", "postgres://u:pw@127.0.0.1:1/x", "stats"]);
    assert_eq!(code, 3);
    assert!(
        !err.contains(":pw@") && err.contains("postgres://u:***@127.0.0.1:1/x"),
        "{err}"
    );
    let (code, _, err) = run(&["--redis", "redis://:Sup3rSecretPw@127.0.0.1:1:2/", "stats"]);
    assert_eq!(code, 3);
    assert!(!err.contains("Sup3rSecretPw"), "{err}");
}

/// The library's own errors and Debug output name no password either.
#[tokio::test]
async fn store_errors_name_no_password() {
    let Err(redis) = idem::RedisStore::connect("redis://:Sup3rSecretPw@127.0.0.1:6379/").await
    else {
        panic!("the password was accepted");
    };
    let Err(pg) =
        idem::PostgresStore::connect("postgres://nobody_idem:Pg5ecretPw@127.0.0.1:5432/test").await
    else {
        panic!("the role was accepted");
    };
    let refused =
        mysql_server::url()
            .await
            .replacen("mysql://root@", "mysql://nobody_idem:My5ecretPw@", 1);
    let Err(my) = idem::MySqlStore::connect(&refused).await else {
        panic!("the user was accepted");
    };
    for shown in [
        redis.to_string(),
        format!("{redis:?}"),
        pg.to_string(),
        format!("{pg:?}"),
        my.to_string(),
        format!("{my:?}"),
    ] {
        assert!(
            !shown.contains("Sup3rSecretPw")
                && !shown.contains("Pg5ecretPw")
                && !shown.contains("My5ecretPw"),
            "{shown}"
        );
    }
}

/// A file's bytes, and the SQLite files beside it.
fn snapshot(path: &Path) -> (Vec<u8>, Vec<String>) {
    let dir = path.parent().unwrap();
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    (std::fs::read(path).unwrap(), names)
}

async fn journal_mode(path: &Path) -> String {
    let url = format!("sqlite://{}?mode=ro", path.display());
    let db = sqlx::SqlitePool::connect(&url).await.unwrap();
    let mode: String = sqlx::query_scalar("PRAGMA journal_mode")
        .fetch_one(&db)
        .await
        .unwrap();
    db.close().await;
    mode
}

/// Item 4: another program's SQLite file, and an idem file of an older
/// schema, are refused by every command (exit 3) and left byte for byte
/// as they were: no tables, no WAL, no upgrade.
#[tokio::test]
async fn a_sqlite_file_that_is_not_idems_is_refused_and_left_unchanged() {
    let foreign = temp_path("foreign");
    let url = format!("sqlite://{}?mode=rwc", foreign.display());
    let db = sqlx::SqlitePool::connect(&url).await.unwrap();
    sqlx::raw_sql("CREATE TABLE invoices (id INTEGER PRIMARY KEY, cents INTEGER); INSERT INTO invoices VALUES (1, 1200);")
        .execute(&db)
        .await
        .unwrap();
    db.close().await;

    let v1 = temp_path("v1");
    let url = format!("sqlite://{}?mode=rwc", v1.display());
    let db = sqlx::SqlitePool::connect(&url).await.unwrap();
    sqlx::raw_sql(
        "CREATE TABLE idem_migrations (version INTEGER PRIMARY KEY, applied_at INTEGER NOT NULL);
         CREATE TABLE idem_records (key BLOB PRIMARY KEY, token BLOB NOT NULL, fingerprint BLOB NOT NULL,
             record BLOB, expires_at INTEGER NOT NULL) WITHOUT ROWID;
         INSERT INTO idem_migrations VALUES (2, 0);",
    )
    .execute(&db)
    .await
    .unwrap();
    db.close().await;

    let record = "a".repeat(64);
    let commands: [&[&str]; 5] = [
        &["stats"],
        &["list"],
        &["purge"],
        &["inspect", "--record", &record],
        &["forget", "--scope", "s", "--key", "k"],
    ];
    for (path, says) in [
        (&foreign, "not a file of idem's records"),
        (&v1, "schema version 2"),
    ] {
        let before = snapshot(path);
        for args in commands {
            let path = path.to_str().unwrap();
            let (code, _, err) = run(&[args, &["--sqlite", path]].concat());
            assert_eq!(code, 3, "{args:?}: {err}");
            assert!(err.contains(says), "{args:?}: {err}");
        }
        assert!(snapshot(path) == before, "{} was changed", path.display());
        assert_eq!(journal_mode(path).await, "delete");
    }
}

/// Item 4: reading commands open idem's file read-only: a file kept in
/// rollback-journal mode stays so (opening it as the store does switched
/// it to WAL) and its bytes do not change.
#[tokio::test]
async fn reading_an_idem_file_changes_nothing() {
    use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode};
    let path = temp_path("rollback");
    let options = SqliteConnectOptions::new()
        .filename(&path)
        .create_if_missing(true)
        .journal_mode(SqliteJournalMode::Delete);
    let store = SqliteStore::open_with(options).await.unwrap();
    let idem = Idempotency::new(store.clone());
    let _: u32 = idem
        .call("s", "k")
        .run(|| async { Ok::<_, Error>(7) })
        .await
        .unwrap();
    store.close().await;
    let before = snapshot(&path);
    let p = path.to_str().unwrap();
    let key = RecordKey::new("s", "k").to_hex();
    for args in [
        &["stats", "--sqlite", p][..],
        &["list", "--sqlite", p],
        &["inspect", "--sqlite", p, "--record", &key],
        &[
            "--sqlite", p, "--json", "inspect", "--scope", "s", "--key", "k",
        ],
    ] {
        let (code, _, err) = run(args);
        assert_eq!(code, 0, "{args:?}: {err}");
    }
    assert!(snapshot(&path) == before, "reading changed the file");
    assert_eq!(journal_mode(&path).await, "delete");
}

/// Item 4: a PostgreSQL schema or table without idem's table is refused
/// (exit 3, saying nothing was changed) and not created.
#[tokio::test]
async fn a_postgres_database_without_idems_table_is_refused_and_unchanged() {
    let url = pg_server::url().await;
    let schema = pg_server::unique_schema("cli37");
    for args in [&["stats"][..], &["purge"], &["list"]] {
        let (code, _, err) = run(&[args, &["--postgres", &url, "--schema", &schema]].concat());
        assert_eq!(code, 3, "{err}");
        assert!(
            err.contains("no idem table") && err.contains("nothing was changed"),
            "{err}"
        );
    }
    let db = sqlx::PgPool::connect(&url).await.unwrap();
    let created: bool = sqlx::query_scalar("SELECT to_regnamespace($1) IS NOT NULL")
        .bind(&schema)
        .fetch_one(&db)
        .await
        .unwrap();
    assert!(!created, "the CLI created the schema");
}

/// The tables of `table` in the tests' MySQL database, and its rows.
async fn mysql_snapshot(table: &str) -> (Vec<String>, i64) {
    let mut db = mysql_server::admin().await;
    let names: Vec<String> = sqlx::query_scalar(
        "SELECT CAST(table_name AS CHAR) FROM information_schema.tables \
         WHERE table_schema = DATABASE() AND table_name LIKE CONCAT(?, '%') ORDER BY 1",
    )
    .bind(table)
    .fetch_all(&mut db)
    .await
    .unwrap();
    let rows = if names.iter().any(|n| n == table) {
        sqlx::query_scalar(&format!("SELECT COUNT(*) FROM `{table}`"))
            .fetch_one(&mut db)
            .await
            .unwrap()
    } else {
        0
    };
    (names, rows)
}

/// Item 4 for MySQL: a database without idem's tables, or with them at
/// another schema version, or no database at all, is refused by every
/// command (exit 3, saying nothing was changed) and left as it was.
#[tokio::test]
async fn a_mysql_database_without_idems_table_is_refused_and_unchanged() {
    let url = mysql_server::url().await;
    let table = mysql_server::unique_table("cli37");
    let commands = [
        &["stats"][..],
        &["purge"],
        &["list"],
        &["forget", "--scope", "s", "--key", "k"],
    ];
    for args in commands {
        let (code, _, err) = run(&[args, &["--mysql", &url, "--table", &table]].concat());
        assert_eq!(code, 3, "{err}");
        assert!(
            err.contains("no idem table") && err.contains("nothing was changed"),
            "{err}"
        );
    }
    assert_eq!(
        mysql_snapshot(&table).await,
        (vec![], 0),
        "the CLI created a table"
    );

    // No database in the URL: no table either.
    let no_database = url.rsplit_once('/').unwrap().0.to_owned() + "/";
    let (code, _, err) = run(&["--mysql", &no_database, "stats"]);
    assert_eq!(code, 3, "{err}");
    assert!(err.contains("no idem table"), "{err}");

    // Set up by a later release: refused, its records left alone.
    let store = idem::MySqlStore::builder()
        .table(table.clone())
        .connect(&url)
        .await
        .unwrap();
    store.migrate().await.unwrap();
    let idem = Idempotency::new(store);
    let _: u32 = idem
        .call("s", "k")
        .run(|| async { Ok::<_, Error>(7) })
        .await
        .unwrap();
    let mut db = mysql_server::admin().await;
    sqlx::query(&format!(
        "INSERT INTO `{table}_migrations` VALUES (99, UTC_TIMESTAMP(6))"
    ))
    .execute(&mut db)
    .await
    .unwrap();
    let before = mysql_snapshot(&table).await;
    assert_eq!(before.1, 1);
    for args in commands {
        let (code, _, err) = run(&[args, &["--mysql", &url, "--table", &table]].concat());
        assert_eq!(code, 3, "{err}");
        assert!(
            err.contains("schema version 99") && err.contains("nothing was changed"),
            "{err}"
        );
    }
    assert_eq!(mysql_snapshot(&table).await, before);
}

#[derive(Debug, PartialEq, serde::Serialize, serde::Deserialize)]
struct Exact {
    max: u128,
    ratio: f64,
    note: Option<Option<u8>>,
    #[serde(rename = "$ref")]
    reference: String,
}

/// Item 5: `inspect` shows a format-3 record as stored: `u128::MAX`, NaN
/// and `Some(None)` kept (its own JSON for `--json`, the escapes rendered
/// for people), never "shape changed".
#[tokio::test]
async fn inspect_shows_exact_values() {
    let path = temp_path("exact");
    let store = SqliteStore::open(&path).await.unwrap();
    let idem = Idempotency::new(store);
    let exact: Result<Exact, Error> = idem
        .call("exact", "v")
        .run(|| async {
            Ok(Exact {
                max: u128::MAX,
                ratio: f64::NAN,
                note: Some(None),
                reference: "r".into(),
            })
        })
        .await;
    exact.unwrap();
    let p = path.to_str().unwrap();
    let which = ["inspect", "--sqlite", p, "--scope", "exact", "--key", "v"];
    let inspected = json_of(&[&which[..], &["--json"]].concat());
    assert_eq!(
        inspected["value"]["json"],
        json!({
            "max": { "$u128": "340282366920938463463374607431768211455" },
            "ratio": { "$f64": "NaN" },
            "note": { "$some": null },
            "$$ref": "r",
        }),
        "{inspected}"
    );
    let (code, text, err) = run(&which);
    assert_eq!(code, 0, "{err}");
    for shown in [
        "\"max\": 340282366920938463463374607431768211455",
        "\"ratio\": NaN",
        "\"note\": Some(null)",
        "\"$ref\": \"r\"",
    ] {
        assert!(text.contains(shown), "{shown} not in {text}");
    }
    assert!(!text.contains("shape changed"), "{text}");
}

/// Item 9: store flags and `--json` after the command, exit codes in
/// `--help`, `--record` by unique prefix (ambiguous: exit 2 listing the
/// candidates), and a hint when a tuple scope was given as one string.
#[tokio::test]
async fn the_cli_takes_what_a_newcomer_types() {
    let path = temp_path("newcomer");
    let store = SqliteStore::open(&path).await.unwrap();
    let idem = Idempotency::new(store);
    // Two keys whose hashes share their first four hex digits.
    let mut seen: HashMap<String, String> = HashMap::new();
    let (a, b) = (0..)
        .find_map(|i| {
            let key = format!("k-{i}");
            let prefix = RecordKey::new("p", key.as_str()).to_hex()[..4].to_owned();
            seen.insert(prefix, key.clone()).map(|other| (other, key))
        })
        .unwrap();
    for key in [&a, &b] {
        let _: u8 = idem
            .call("p", key.as_str())
            .run(|| async { Ok::<_, Error>(1) })
            .await
            .unwrap();
    }
    let _: u8 = idem
        .call(&("payments", "acme"), "o-1")
        .run(|| async { Ok::<_, Error>(2) })
        .await
        .unwrap();
    let p = path.to_str().unwrap();

    let stats = json_of(&["stats", "--sqlite", p, "--json"]);
    assert_eq!(stats["completed"], 3, "{stats}");
    let (code, help, _) = run(&["--help"]);
    assert_eq!(code, 0);
    assert!(
        help.contains("Exit codes:") && help.contains("3  the store"),
        "{help}"
    );

    let full_a = RecordKey::new("p", a.as_str()).to_hex();
    let inspected = json_of(&[
        "inspect",
        "--record",
        &full_a[..10],
        "--sqlite",
        p,
        "--json",
    ]);
    assert_eq!(inspected["key"], full_a.as_str());
    let (code, _, err) = run(&["inspect", "--record", &full_a[..4], "--sqlite", p]);
    assert_eq!(code, 2, "{err}");
    let full_b = RecordKey::new("p", b.as_str()).to_hex();
    assert!(
        err.contains("ambiguous") && err.contains(&full_a) && err.contains(&full_b),
        "{err}"
    );
    let forgot = json_of(&[
        "forget",
        "--record",
        &full_b[..12].to_uppercase(),
        "--sqlite",
        p,
        "--json",
    ]);
    assert_eq!(forgot["forgot"], full_b.as_str());
    let (code, _, err) = run(&["inspect", "--record", "ffffffffff", "--sqlite", p]);
    assert_eq!(code, 1, "{err}");

    let (code, _, err) = run(&[
        "inspect",
        "--sqlite",
        p,
        "--scope",
        "payments,acme",
        "--key",
        "o-1",
    ]);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("--scope payments --scope acme"), "{err}");
    let tuple = json_of(&[
        "inspect", "--sqlite", p, "--scope", "payments", "--scope", "acme", "--key", "o-1",
        "--json",
    ]);
    assert_eq!(tuple["value"]["json"], 2);
}

/// Item 9: a response the HTTP layer stored lists under its method and
/// route, and `inspect` shows it as status, headers and body.
#[tokio::test]
async fn http_records_show_their_route_and_response() {
    use axum::Router;
    use axum::body::Body;
    use axum::http::{Request, StatusCode};
    use axum::routing::post;
    use tower::ServiceExt;

    let path = temp_path("http");
    let store = SqliteStore::open(&path).await.unwrap();
    let app = Router::new()
        .route(
            "/orders/{id}",
            post(|| async {
                (
                    StatusCode::CREATED,
                    [("content-type", "application/json")],
                    "{\"order\":\"o-1\"}",
                )
            }),
        )
        .layer(idem::http::IdempotencyLayer::new(Idempotency::new(store)));
    let request = Request::post("/orders/7")
        .header("idempotency-key", "key-1")
        .body(Body::from("{}"))
        .unwrap();
    let response = app.oneshot(request).await.unwrap();
    assert_eq!(response.status(), StatusCode::CREATED);

    let p = path.to_str().unwrap();
    let listed = json_of(&["list", "--sqlite", p, "--json"]);
    assert_eq!(listed[0]["site"], "POST /orders/{id}", "{listed}");
    let key = listed[0]["key"].as_str().unwrap();
    let (code, text, err) = run(&["inspect", "--sqlite", p, "--record", key]);
    assert_eq!(code, 0, "{err}");
    assert!(text.contains("status       201"), "{text}");
    assert!(text.contains("content-type: application/json"), "{text}");
    assert!(text.contains("body         {\"order\":\"o-1\"}"), "{text}");
    assert!(!text.contains("\"t\""), "{text}");
    let inspected = json_of(&["inspect", "--sqlite", p, "--record", key, "--json"]);
    assert_eq!(inspected["value"]["response"]["status"], 201, "{inspected}");
    assert_eq!(
        inspected["value"]["response"]["body"],
        json!({ "text": "{\"order\":\"o-1\"}" })
    );
}

/// A call with two saved steps that then fails (released): its claim and
/// steps stay until they expire.
async fn call_with_steps(idem: &Idempotency, key: &str) {
    let out: Result<u8, Error> = idem
        .call("steps", key)
        .run(|| async {
            idem::step("one", || async { Ok::<_, Error>(1u8) }).await?;
            idem::step("two", || async { Ok::<_, Error>(2u8) }).await?;
            Err(Error::InvalidKey("fail after the steps".into()))
        })
        .await;
    assert!(out.is_err());
}

/// Item 10: `purge` counts records and steps apart (SQLite and
/// PostgreSQL).
#[tokio::test]
async fn purge_counts_steps_apart_from_records() {
    let path = temp_path("purge");
    let store = SqliteStore::open(&path).await.unwrap();
    let idem = Idempotency::new(store);
    let _: u8 = idem
        .call("steps", "done")
        .run(|| async { Ok::<_, Error>(1) })
        .await
        .unwrap();
    call_with_steps(&idem, "failed").await;
    let db = sqlx::SqlitePool::connect(&format!("sqlite://{}", path.display()))
        .await
        .unwrap();
    sqlx::raw_sql("UPDATE idem_records SET expires_at = 0; UPDATE idem_steps SET expires_at = 0;")
        .execute(&db)
        .await
        .unwrap();
    let purged = json_of(&["purge", "--sqlite", path.to_str().unwrap(), "--json"]);
    assert_eq!(purged, json!({ "purged": 1, "steps": 2, "tombstones": 0 }));

    let url = pg_server::url().await;
    let schema = pg_server::unique_schema("cli37_purge");
    let store = idem::PostgresStore::builder()
        .schema(schema.clone())
        .connect(&url)
        .await
        .unwrap();
    store.migrate().await.unwrap();
    let idem = Idempotency::new(store);
    let _: u8 = idem
        .call("steps", "done")
        .run(|| async { Ok::<_, Error>(1) })
        .await
        .unwrap();
    call_with_steps(&idem, "failed").await;
    let db = sqlx::PgPool::connect(&url).await.unwrap();
    sqlx::raw_sql(&format!(
        "UPDATE \"{schema}\".idem_records SET expires_at = now() - interval '1 day';
         UPDATE \"{schema}\".idem_records_steps SET expires_at = now() - interval '1 day';"
    ))
    .execute(&db)
    .await
    .unwrap();
    let purged = json_of(&["purge", "--postgres", &url, "--schema", &schema, "--json"]);
    assert_eq!(purged, json!({ "purged": 1, "steps": 2, "tombstones": 0 }));
    let (code, text, _) = run(&["purge", "--postgres", &url, "--schema", &schema]);
    assert_eq!(code, 0);
    // It says which store and table it purged.
    let (done, place) = text.split_once(" in PostgreSQL at ").unwrap();
    assert_eq!(
        done,
        "purged 0 expired record(s) and 0 step(s) of expired calls"
    );
    assert!(
        place.ends_with(&format!(", table {schema}.idem_records\n")),
        "{text}"
    );
}

/// Item 10: SQLite `forget` removes steps and record together: when
/// deleting the record fails, the steps are still there (they were
/// deleted by a statement of their own before).
#[tokio::test]
async fn sqlite_forget_is_all_or_nothing() {
    let path = temp_path("forget");
    let store = SqliteStore::open(&path).await.unwrap();
    let idem = Idempotency::new(store.clone());
    let out: Result<u8, Error> = idem
        .call("steps", "k")
        .run(|| async {
            idem::step("one", || async { Ok::<_, Error>(1u8) }).await?;
            idem::step("two", || async { Ok::<_, Error>(2u8) }).await
        })
        .await;
    assert_eq!(out.unwrap(), 2);
    let db = sqlx::SqlitePool::connect(&format!("sqlite://{}", path.display()))
        .await
        .unwrap();
    let steps: i64 = sqlx::query_scalar("SELECT count(*) FROM idem_steps")
        .fetch_one(&db)
        .await
        .unwrap();
    assert_eq!(steps, 2, "steps are kept with the completed record");
    // The record's delete fails, as a full disk or an I/O error would.
    sqlx::raw_sql(
        "CREATE TRIGGER no_forget BEFORE DELETE ON idem_records BEGIN SELECT RAISE(ABORT, 'disk full'); END;",
    )
    .execute(&db)
    .await
    .unwrap();
    let (code, _, err) = run(&[
        "forget",
        "--sqlite",
        path.to_str().unwrap(),
        "--scope",
        "steps",
        "--key",
        "k",
    ]);
    assert_eq!(code, 3, "{err}");
    let steps: i64 = sqlx::query_scalar("SELECT count(*) FROM idem_steps")
        .fetch_one(&db)
        .await
        .unwrap();
    assert_eq!(steps, 2, "a failed forget deleted the steps alone");
    sqlx::raw_sql("DROP TRIGGER no_forget")
        .execute(&db)
        .await
        .unwrap();
    json_of(&[
        "forget",
        "--sqlite",
        path.to_str().unwrap(),
        "--scope",
        "steps",
        "--key",
        "k",
        "--json",
    ]);
    let left: i64 = sqlx::query_scalar(
        "SELECT (SELECT count(*) FROM idem_steps) + (SELECT count(*) FROM idem_records)",
    )
    .fetch_one(&db)
    .await
    .unwrap();
    assert_eq!(left, 0);
}
