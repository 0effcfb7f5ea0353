//! Where the Redis tests find a server: `IDEM_TEST_REDIS_URL` if set; else
//! the machine's Redis on 127.0.0.1:6379; else a private `redis-server`
//! this process starts on a reserved loopback port (`ports.rs`), stopped
//! when the process
//! exits. Without any of these the tests fail, saying to install
//! redis-server; they are never skipped.
//!
//! Fault tests always start private servers ([`PrivateRedis`]), which
//! they may kill and restart; the shared server is never touched.

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
use std::path::PathBuf;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::time::Duration;

use tokio::sync::OnceCell;

static SHARED: OnceCell<String> = OnceCell::const_new();

/// The URL of a Redis for the tests of this process.
pub(crate) async fn url() -> String {
    SHARED
        .get_or_init(|| async {
            if let Ok(url) = std::env::var("IDEM_TEST_REDIS_URL") {
                return url;
            }
            let local = "redis://127.0.0.1:6379".to_owned();
            if answers(&local).await {
                return local;
            }
            let server = PrivateRedis::start(&[]);
            let url = server.url();
            // Its guardian stops it when this process exits.
            std::mem::forget(server);
            url
        })
        .await
        .clone()
}

/// Whether a Redis at `url` answers PING within a second.
pub(crate) async fn answers(url: &str) -> bool {
    let Ok(client) = redis::Client::open(url) else {
        return false;
    };
    let ping = async {
        let mut conn = client.get_multiplexed_async_connection().await.ok()?;
        redis::cmd("PING")
            .query_async::<String>(&mut conn)
            .await
            .ok()
    };
    matches!(
        tokio::time::timeout(Duration::from_secs(1), ping).await,
        Ok(Some(_))
    )
}

/// A `redis-server` of this process's own, in a temporary directory.
/// Dropping it, or the process exiting however it ends, stops it.
pub(crate) struct PrivateRedis {
    pub port: u16,
    /// Keeps `port` ours across restarts.
    _reserved: ports::Reserved,
    /// The server binary: `redis-server`, or a `valkey-server`.
    program: String,
    /// A cluster node's bus port (by default `port + 10000`, which falls
    /// in the kernel's ephemeral range and may be taken), reserved too.
    bus: Option<ports::Reserved>,
    dir: PathBuf,
    extra: Vec<String>,
    guardian: Option<(Child, ChildStdin)>,
}

impl PrivateRedis {
    /// Starts a server on a reserved port with `extra` arguments.
    pub(crate) fn start(extra: &[&str]) -> Self {
        Self::start_program("redis-server", extra)
    }

    /// Starts `program` (a `redis-server` or `valkey-server` binary) on a
    /// reserved port with `extra` arguments.
    pub(crate) fn start_program(program: &str, extra: &[&str]) -> Self {
        remove_stale_dirs();
        let reserved = ports::reserve();
        let port = reserved.port;
        let dir = std::env::temp_dir().join(format!("idem-redis-{}-{port}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let mut server = PrivateRedis {
            port,
            _reserved: reserved,
            program: program.to_owned(),
            bus: extra.contains(&"--cluster-enabled").then(ports::reserve),
            dir,
            extra: Vec::new(),
            guardian: None,
        };
        server.restart_with(extra);
        server
    }

    /// Starts `program` in the server's place, on the same port, with
    /// `extra` arguments (a failover to another server).
    pub(crate) fn restart_as(&mut self, program: &str, extra: &[&str]) {
        self.program = program.to_owned();
        self.restart_with(extra);
    }

    /// Starts the server again on the same port with `extra` arguments
    /// instead of its first ones, as another server would be.
    pub(crate) fn restart_with(&mut self, extra: &[&str]) {
        self.extra = extra.iter().map(|s| (*s).to_owned()).collect();
        self.restart();
    }

    pub(crate) fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    /// Starts the server (again) on the same port.
    pub(crate) fn restart(&mut self) {
        self.kill();
        let mut args = vec![
            "--port".to_owned(),
            self.port.to_string(),
            "--bind".to_owned(),
            "127.0.0.1".to_owned(),
            "--save".to_owned(),
            String::new(),
            "--appendonly".to_owned(),
            "no".to_owned(),
            "--dir".to_owned(),
            self.dir.display().to_string(),
        ];
        args.extend(self.extra.iter().cloned());
        if let Some(bus) = &self.bus {
            args.extend(["--cluster-port".to_owned(), bus.port.to_string()]);
        }
        let quoted: Vec<String> = args.iter().map(|a| format!("'{a}'")).collect();
        // The guardian shell runs the server and kills it as soon as its
        // stdin closes: when we drop it, or when this process dies.
        let script = format!(
            "'{}' {} >/dev/null 2>&1 & pid=$!; echo started; cat >/dev/null; kill -9 $pid; wait $pid",
            self.program,
            quoted.join(" ")
        );
        let mut guardian = Command::new("sh")
            .arg("-c")
            .arg(script)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot run sh to start redis-server: {e}"));
        let mut line = String::new();
        BufReader::new(guardian.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let stdin = guardian.stdin.take().unwrap();
        self.guardian = Some((guardian, stdin));
        let url = self.url();
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        loop {
            let ready = std::thread::spawn({
                let url = url.clone();
                move || {
                    redis::Client::open(url.as_str())
                        .and_then(|c| c.get_connection_with_timeout(Duration::from_millis(200)))
                        .and_then(|mut c| redis::cmd("PING").query::<String>(&mut c))
                        .is_ok()
                }
            })
            .join()
            .unwrap();
            if ready {
                return;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "{} did not start on port {}: install it (Debian: apt-get install redis-server; Valkey: scripts/valkey) or set IDEM_TEST_REDIS_URL",
                self.program,
                self.port
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Kills the server at once (SIGKILL), as a crash would.
    pub(crate) fn kill(&mut self) {
        if let Some((mut guardian, stdin)) = self.guardian.take() {
            drop(stdin);
            let _ = guardian.wait();
        }
    }
}

impl Drop for PrivateRedis {
    fn drop(&mut self) {
        self.kill();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Removes the directories of private servers whose test process is gone
/// (the shared and cluster servers are never dropped, so their directories
/// outlive the process; their servers do not).
fn remove_stale_dirs() {
    let Ok(entries) = std::fs::read_dir(std::env::temp_dir()) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(pid) = name
            .to_str()
            .and_then(|n| n.strip_prefix("idem-redis-"))
            .and_then(|rest| rest.split('-').next())
        else {
            continue;
        };
        if !std::path::Path::new(&format!("/proc/{pid}")).exists() {
            let _ = std::fs::remove_dir_all(entry.path());
        }
    }
}
