//! Where the MySQL tests find a server: `IDEM_TEST_MYSQL_URL` if set, else
//! the machine's MariaDB or MySQL on 127.0.0.1:3306 (user `root`, no
//! password, database `test`); when nothing answers there, a private
//! MariaDB this process starts with `mariadb-install-db` and `mariadbd` in
//! a temporary directory, stopped when the process exits. Without any of
//! these the tests fail, saying what to install; they are never skipped.

#![allow(dead_code)]

// Also loaded by the other servers' support files in binaries using
// several: two copies claim ports through the kernel, so they never hand
// out one.
#[allow(
    clippy::duplicate_mod,
    reason = "mysql_server.rs, pg_server.rs and redis_server.rs are each included alone too"
)]
#[path = "ports.rs"]
pub(crate) mod ports;

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use sqlx::Connection;
use sqlx::mysql::MySqlConnection;
use tokio::sync::OnceCell;

static SHARED: OnceCell<String> = OnceCell::const_new();

/// The URL of a server for the tests of this process.
pub(crate) async fn url() -> String {
    SHARED
        .get_or_init(|| async {
            let url = std::env::var("IDEM_TEST_MYSQL_URL")
                .unwrap_or_else(|_| "mysql://root@127.0.0.1:3306/test".to_owned());
            if answers(&url).await {
                return url;
            }
            eprintln!("no MySQL or MariaDB answers at {url}: starting a private MariaDB");
            let server = PrivateServer::start().await;
            let url = server.url();
            // Its guardian stops it when this process exits.
            std::mem::forget(server);
            url
        })
        .await
        .clone()
}

async fn answers(url: &str) -> bool {
    let attempt = async {
        let mut conn = MySqlConnection::connect(url).await.ok()?;
        sqlx::query("SELECT 1").execute(&mut conn).await.ok()?;
        Some(())
    };
    matches!(
        tokio::time::timeout(Duration::from_secs(3), attempt).await,
        Ok(Some(()))
    )
}

/// A table name no other test or run uses (at most 53 bytes, so the
/// store's suffixes fit). Leftovers of runs older than a day are dropped
/// by [`drop_stale_tables`].
pub(crate) fn unique_table(test: &str) -> String {
    let secs = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs();
    let test: String = test.chars().take(20).collect();
    format!(
        "idem_t_{secs}_{test}_{:08x}",
        idem::store::Token::random().to_u128() as u32
    )
}

/// A connection of the tests' own, beside the store's.
pub(crate) async fn admin() -> MySqlConnection {
    MySqlConnection::connect(&url().await)
        .await
        .expect("admin connection")
}

/// Drops the tables and procedures of test runs older than a day.
pub(crate) async fn drop_stale_tables() {
    let mut conn = admin().await;
    let cutoff = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs()
        - 86_400;
    let stale = |name: &String| {
        let secs = name.split('_').nth(2).and_then(|s| s.parse::<u64>().ok());
        secs.is_some_and(|secs| secs < cutoff)
    };
    let tables: Vec<String> = sqlx::query_scalar(
        "SELECT CAST(table_name AS CHAR) FROM information_schema.tables \
         WHERE table_schema = DATABASE() AND table_name LIKE 'idem\\_t\\_%'",
    )
    .fetch_all(&mut conn)
    .await
    .unwrap_or_default();
    for name in tables.iter().filter(|name| stale(name)) {
        let _ = sqlx::raw_sql(&format!("DROP TABLE IF EXISTS `{name}`"))
            .execute(&mut conn)
            .await;
    }
    let procedures: Vec<String> = sqlx::query_scalar(
        "SELECT CAST(routine_name AS CHAR) FROM information_schema.routines \
         WHERE routine_schema = DATABASE() AND routine_name LIKE 'idem\\_t\\_%'",
    )
    .fetch_all(&mut conn)
    .await
    .unwrap_or_default();
    for name in procedures.iter().filter(|name| stale(name)) {
        let _ = sqlx::raw_sql(&format!("DROP PROCEDURE IF EXISTS `{name}`"))
            .execute(&mut conn)
            .await;
    }
}

/// A MariaDB server of this process's own, in a temporary directory, with
/// a database `test` and `root` let in without a password. Dropping it
/// (or the process exiting, however it ends) stops it and removes the
/// directory.
pub(crate) struct PrivateServer {
    dir: PathBuf,
    /// Keeps `port` ours while the server lives.
    reserved: ports::Reserved,
    /// The guardian shell waits on this pipe; when it closes, it stops
    /// the server.
    guardian_stdin: Option<ChildStdin>,
    guardian: Child,
}

/// Small files, set up in seconds; commits as durable as a default
/// server's (the SIGKILL tests time their kills against them).
const SERVER_OPTIONS: &str =
    "--innodb-log-file-size=4M --innodb-buffer-pool-size=32M --skip-log-bin --max-connections=300";

impl PrivateServer {
    /// Initializes and starts a new server on a reserved port, and waits
    /// until it answers.
    pub(crate) async fn start() -> Self {
        let (install, server) = binaries();
        let dir = std::env::temp_dir().join(format!(
            "idem-mysql-{}-{:08x}",
            std::process::id(),
            idem::store::Token::random().to_u128() as u32
        ));
        std::fs::create_dir_all(&dir).unwrap();
        // mariadbd refuses to run as root unless told to.
        let user = if is_root() { "--user=root" } else { "" };
        // Run at every start, with every privilege: the tests' database,
        // and root over TCP (the installed root is root@localhost).
        std::fs::write(
            dir.join("init.sql"),
            "CREATE DATABASE IF NOT EXISTS test;\n\
             CREATE USER IF NOT EXISTS 'root'@'127.0.0.1';\n\
             GRANT ALL ON *.* TO 'root'@'127.0.0.1' WITH GRANT OPTION;\n",
        )
        .unwrap();
        let d = dir.display();
        let reserved = ports::reserve();
        // One shell does it all, so that whenever this process dies (even
        // while the data directory is made) the directory is removed: its
        // `read` ends with the pipe, and an `echo` to a closed pipe does
        // not kill it (PIPE ignored).
        let mut guardian = Command::new("sh")
            .arg("-c")
            .arg(format!(
                "trap '' PIPE; \
                 if '{install}' --no-defaults --datadir='{d}/data' {user} \
                   --auth-root-authentication-method=normal --skip-test-db {SERVER_OPTIONS} \
                   >'{d}/install.log' 2>&1; then \
                 '{server}' --no-defaults --datadir='{d}/data' {user} --port={port} \
                   --bind-address=127.0.0.1 --socket='{d}/sock' --pid-file='{d}/pid' \
                   --skip-name-resolve --init-file='{d}/init.sql' --log-error='{d}/log' \
                   {SERVER_OPTIONS} & pid=$!; echo started; \
                 else echo \"mariadb-install-db failed: $(tail -5 '{d}/install.log')\"; fi; \
                 read _; [ -n \"$pid\" ] && kill $pid && wait $pid; rm -rf '{d}'",
                install = install.display(),
                server = server.display(),
                port = reserved.port,
            ))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("sh");
        let mut line = String::new();
        BufReader::new(guardian.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        assert_eq!(line.trim(), "started", "the private MariaDB did not start");
        let server = PrivateServer {
            guardian_stdin: guardian.stdin.take(),
            guardian,
            dir,
            reserved,
        };
        server.wait_until_it_answers().await;
        server
    }

    async fn wait_until_it_answers(&self) {
        let started = Instant::now();
        while !answers(&self.url()).await {
            assert!(
                started.elapsed() < Duration::from_secs(60),
                "the private MariaDB did not answer within 60 s; see {}/log",
                self.dir.display()
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Its URL (database `test`, user `root`, no password).
    pub(crate) fn url(&self) -> String {
        format!("mysql://root@127.0.0.1:{}/test", self.reserved.port)
    }

    /// Its directory, removed when the server stops.
    pub(crate) fn dir(&self) -> &Path {
        &self.dir
    }
}

impl Drop for PrivateServer {
    fn drop(&mut self) {
        drop(self.guardian_stdin.take());
        let _ = self.guardian.wait();
    }
}

fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|out| out.stdout.trim_ascii() == b"0")
}

/// `mariadb-install-db` and `mariadbd`: on PATH, or in the sbin
/// directories Debian puts `mariadbd` in (off a user's PATH).
fn binaries() -> (PathBuf, PathBuf) {
    let mut dirs: Vec<PathBuf> = std::env::var_os("PATH")
        .map(|path| std::env::split_paths(&path).collect())
        .unwrap_or_default();
    dirs.extend(["/usr/sbin", "/usr/local/sbin", "/usr/bin"].map(PathBuf::from));
    let find = |name: &str| dirs.iter().map(|dir| dir.join(name)).find(|p| p.is_file());
    match (find("mariadb-install-db"), find("mariadbd")) {
        (Some(install), Some(server)) => (install, server),
        _ => panic!(
            "no MySQL or MariaDB for the tests: nothing answers at IDEM_TEST_MYSQL_URL \
             (default mysql://root@127.0.0.1:3306/test), and mariadb-install-db/mariadbd, \
             with which the tests start a private MariaDB, are not installed. Install \
             MariaDB (Debian: apt-get install mariadb-server) or point IDEM_TEST_MYSQL_URL \
             at a MySQL 8.0+ or MariaDB 10.6+ server (mysql://user:password@host:port/database)."
        ),
    }
}
