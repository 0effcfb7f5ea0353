//! Where the PostgreSQL tests find a server: `IDEM_TEST_DATABASE_URL` if
//! set; else the machine's server on 127.0.0.1:5432, database `test`
//! (trust auth, user `postgres`, then `root`); else a private server this
//! process starts with `initdb` and `pg_ctl` in a temporary directory,
//! stopped when the process exits. Without any of these the tests fail,
//! saying to install PostgreSQL; they are never skipped.

#![allow(dead_code)]

// Also loaded by the other server's support file in binaries using both:
// two copies claim ports through the kernel, so they never hand out one.
#[allow(
    clippy::duplicate_mod,
    reason = "pg_server.rs and redis_server.rs are each included alone too"
)]
#[path = "ports.rs"]
pub(crate) mod ports;

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use sqlx::Connection;
use sqlx::postgres::PgConnection;
use tokio::sync::OnceCell;

static SHARED: OnceCell<String> = OnceCell::const_new();

/// The URL of a server for the tests of this process.
pub(crate) async fn url() -> String {
    SHARED
        .get_or_init(|| async {
            if let Ok(url) = std::env::var("IDEM_TEST_DATABASE_URL") {
                return url;
            }
            for user in ["postgres", "root"] {
                let url = format!("postgres://{user}@127.0.0.1:5432/test");
                if answers(&url).await {
                    return url;
                }
            }
            let server = PrivateServer::start();
            let url = server.url();
            // Its guardian stops it when this process exits.
            std::mem::forget(server);
            url
        })
        .await
        .clone()
}

/// A schema name no other test or run uses. Leftovers of runs older than
/// a day are dropped by [`drop_stale_schemas`].
pub(crate) fn unique_schema(test: &str) -> String {
    let secs = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs();
    format!(
        "idem_t_{secs}_{test}_{:08x}",
        idem::store::Token::random().to_u128() as u32
    )
}

/// Drops schemas of test runs older than a day.
pub(crate) async fn drop_stale_schemas(url: &str) {
    let Ok(mut conn) = PgConnection::connect(url).await else {
        return;
    };
    let cutoff = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs()
        - 86_400;
    let names: Vec<String> = sqlx::query_scalar(
        "SELECT nspname::text FROM pg_namespace WHERE nspname LIKE 'idem\\_t\\_%'",
    )
    .fetch_all(&mut conn)
    .await
    .unwrap_or_default();
    for name in names {
        let secs = name.split('_').nth(2).and_then(|s| s.parse::<u64>().ok());
        if secs.is_some_and(|secs| secs < cutoff) {
            let _ = sqlx::raw_sql(&format!("DROP SCHEMA IF EXISTS \"{name}\" CASCADE"))
                .execute(&mut conn)
                .await;
        }
    }
}

async fn answers(url: &str) -> bool {
    let attempt = async {
        let mut conn = PgConnection::connect(url).await.ok()?;
        sqlx::query("SELECT 1").execute(&mut conn).await.ok()?;
        Some(())
    };
    matches!(
        tokio::time::timeout(Duration::from_secs(3), attempt).await,
        Ok(Some(()))
    )
}

/// A PostgreSQL server of this process's own, in a temporary directory.
/// Dropping it (or the process exiting, however it ends) stops it and
/// removes the directory.
pub(crate) struct PrivateServer {
    dir: PathBuf,
    bin: PathBuf,
    port: u16,
    /// Keeps `port` ours across restarts.
    _reserved: ports::Reserved,
    /// The guardian shell waits on this pipe; when it closes, it stops
    /// the server.
    guardian_stdin: Option<ChildStdin>,
    guardian: Child,
}

impl PrivateServer {
    /// Initializes and starts a new server on a free port.
    pub(crate) fn start() -> Self {
        let bin = bin_dir();
        let dir = std::env::temp_dir().join(format!(
            "idem-pg-{}-{:08x}",
            std::process::id(),
            idem::store::Token::random().to_u128() as u32
        ));
        std::fs::create_dir_all(&dir).unwrap();
        if is_root() {
            // initdb refuses to run as root.
            run(Command::new("chown").arg("postgres:").arg(&dir));
        }
        run(as_postgres(&bin.join("initdb"))
            .args([
                "-U",
                "postgres",
                "--auth=trust",
                "--no-sync",
                "-E",
                "UTF8",
                "-D",
            ])
            .arg(dir.join("data")));
        let reserved = ports::reserve();
        let port = reserved.port;
        let mut guardian = Command::new("sh")
            .arg("-c")
            .arg(format!(
                "{start} >/dev/null && echo ready; read _; {stop} >/dev/null 2>&1; rm -rf '{dir}'",
                start = pg_ctl_start(&bin, &dir, port),
                stop = pg_ctl(&bin, &dir, "stop -m immediate"),
                dir = dir.display(),
            ))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("sh");
        let mut line = String::new();
        BufReader::new(guardian.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        assert_eq!(
            line.trim(),
            "ready",
            "the private PostgreSQL did not start; see {}/log",
            dir.display()
        );
        PrivateServer {
            guardian_stdin: guardian.stdin.take(),
            guardian,
            dir,
            bin,
            port,
            _reserved: reserved,
        }
    }

    /// Its URL (database `postgres`).
    pub(crate) fn url(&self) -> String {
        format!("postgres://postgres@127.0.0.1:{}/postgres", self.port)
    }

    /// Stops the server (fast shutdown: sessions are cut).
    pub(crate) fn stop(&self) {
        run(Command::new("sh")
            .arg("-c")
            .arg(pg_ctl(&self.bin, &self.dir, "stop -m fast -w")));
    }

    /// Freezes (`true`) or thaws (`false`) the server and every backend with
    /// SIGSTOP / SIGCONT: connections stay open, nothing answers.
    pub(crate) fn pause(&self, paused: bool) {
        let pid = std::fs::read_to_string(self.dir.join("data/postmaster.pid")).unwrap();
        let pid = pid.lines().next().unwrap().trim().to_owned();
        let signal = if paused { "STOP" } else { "CONT" };
        // Children first on the way down, the postmaster first on the way up.
        let children = format!("pkill -{signal} -P {pid}; true");
        let postmaster = format!("kill -{signal} {pid}");
        let order = if paused {
            [children, postmaster]
        } else {
            [postmaster, children]
        };
        for step in order {
            run(Command::new("sh").arg("-c").arg(step));
        }
    }

    /// Starts it again on the same port.
    pub(crate) fn restart(&self) {
        run(Command::new("sh")
            .arg("-c")
            .arg(pg_ctl_start(&self.bin, &self.dir, self.port)));
    }
}

impl Drop for PrivateServer {
    fn drop(&mut self) {
        drop(self.guardian_stdin.take());
        let _ = self.guardian.wait();
    }
}

fn pg_ctl_start(bin: &Path, dir: &Path, port: u16) -> String {
    pg_ctl(
        bin,
        dir,
        &format!(
            "start -w -l '{log}' -o \"-p {port} -k '{dir}' -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=200\"",
            log = dir.join("log").display(),
            dir = dir.display(),
        ),
    )
}

fn pg_ctl(bin: &Path, dir: &Path, args: &str) -> String {
    let pg_ctl = format!(
        "'{}' -D '{}' {args}",
        bin.join("pg_ctl").display(),
        dir.join("data").display()
    );
    if is_root() {
        format!("runuser -u postgres -- {pg_ctl}")
    } else {
        pg_ctl
    }
}

fn as_postgres(program: &Path) -> Command {
    if is_root() {
        let mut command = Command::new("runuser");
        command.args(["-u", "postgres", "--"]).arg(program);
        command
    } else {
        Command::new(program)
    }
}

fn run(command: &mut Command) {
    let out = command
        .stdout(Stdio::null())
        .output()
        .unwrap_or_else(|err| panic!("{command:?}: {err}"));
    assert!(
        out.status.success(),
        "{command:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|out| out.stdout.trim_ascii() == b"0")
}

/// Where `initdb` and `pg_ctl` are: on PATH or in Debian's
/// /usr/lib/postgresql/*/bin.
fn bin_dir() -> PathBuf {
    if let Some(path) = std::env::var_os("PATH") {
        for dir in std::env::split_paths(&path) {
            if dir.join("initdb").is_file() && dir.join("pg_ctl").is_file() {
                return dir;
            }
        }
    }
    let mut found: Vec<PathBuf> = std::fs::read_dir("/usr/lib/postgresql")
        .into_iter()
        .flatten()
        .flatten()
        .map(|entry| entry.path().join("bin"))
        .filter(|bin| bin.join("initdb").is_file())
        .collect();
    found.sort();
    found.pop().unwrap_or_else(|| {
        panic!(
            "no PostgreSQL for the tests: nothing answers on 127.0.0.1:5432, \
             IDEM_TEST_DATABASE_URL is unset, and initdb/pg_ctl are not installed. \
             Install PostgreSQL (Debian: apt-get install postgresql) or set IDEM_TEST_DATABASE_URL."
        )
    })
}
