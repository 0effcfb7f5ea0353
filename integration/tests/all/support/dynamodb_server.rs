//! Where the DynamoDB tests find an endpoint, one per implementation:
//! dynoxide (crates.io `dynoxide-rs`, `cargo install dynoxide-rs@3.2.0
//! --locked`) at `IDEM_TEST_DYNAMODB_URL` if it answers, else a private
//! `dynoxide serve`; moto (PyPI `moto[server]`) at `IDEM_TEST_MOTO_URL` if
//! it answers, else a private `moto_server`. Private servers run on
//! reserved loopback ports (`ports.rs`), one per process and
//! implementation, stopped when the process exits. Without the program the
//! tests fail, saying what to install; they are never skipped.

#![allow(dead_code)]

use std::io::{BufRead, BufReader};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::time::Duration;

use aws_sdk_dynamodb::config::{BehaviorVersion, Credentials, Region};
use tokio::sync::OnceCell;

use super::redis_server::ports;

/// A DynamoDB implementation the tests run against.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Emulator {
    Dynoxide,
    Moto,
}

static DYNOXIDE: OnceCell<String> = OnceCell::const_new();
static MOTO: OnceCell<String> = OnceCell::const_new();

/// The endpoint URL of `emulator` for this process's tests.
pub(crate) async fn url(emulator: Emulator) -> String {
    let (cell, variable) = match emulator {
        Emulator::Dynoxide => (&DYNOXIDE, "IDEM_TEST_DYNAMODB_URL"),
        Emulator::Moto => (&MOTO, "IDEM_TEST_MOTO_URL"),
    };
    cell.get_or_init(|| async move {
        if let Ok(url) = std::env::var(variable)
            && answers(&url).await
        {
            return url;
        }
        let server = Private::start(emulator);
        let url = server.url();
        // Its guardian stops it when this process exits.
        std::mem::forget(server);
        url
    })
    .await
    .clone()
}

/// A client of the endpoint at `url`, with static test credentials, that
/// keeps no idle connection: a conformance case blocks a runtime worker
/// on purpose (a stalled holder), and a pooled connection whose task
/// waits in that worker's LIFO slot (tokio does not steal it) would stall
/// the other callers' requests with it. Each request connects anew.
pub(crate) fn client(url: &str) -> aws_sdk_dynamodb::Client {
    let http = aws_smithy_http_client::Builder::new()
        .pool_idle_timeout(Duration::ZERO)
        .build_http();
    let config = aws_sdk_dynamodb::Config::builder()
        .http_client(http)
        .behavior_version(BehaviorVersion::latest())
        .region(Region::new("us-east-1"))
        .credentials_provider(Credentials::new("test", "test", None, None, "idem-tests"))
        .endpoint_url(url)
        .build();
    aws_sdk_dynamodb::Client::from_conf(config)
}

/// Whether the endpoint at `url` answers `ListTables` within a second.
pub(crate) async fn answers(url: &str) -> bool {
    let list = client(url).list_tables().limit(1).send();
    matches!(
        tokio::time::timeout(Duration::from_secs(1), list).await,
        Ok(Ok(_))
    )
}

/// A server of this process's own. Dropping it, or the process exiting
/// however it ends, stops it.
pub(crate) struct Private {
    pub(crate) port: u16,
    _reserved: ports::Reserved,
    guardian: Option<(Child, ChildStdin)>,
}

impl Private {
    pub(crate) fn start(emulator: Emulator) -> Self {
        let reserved = ports::reserve();
        let port = reserved.port;
        let (program, install) = match emulator {
            Emulator::Dynoxide => (
                dynoxide(),
                "install dynoxide (cargo install dynoxide-rs@3.2.0 --locked; scripts/test does) or set IDEM_TEST_DYNAMODB_URL",
            ),
            Emulator::Moto => (
                "python3".to_owned(),
                "install moto's server (pip install 'moto[server]'; scripts/test does) or set IDEM_TEST_MOTO_URL",
            ),
        };
        let args = match emulator {
            Emulator::Dynoxide => format!("serve --host 127.0.0.1 --port {port} --log quiet"),
            Emulator::Moto => format!("-c '{MOTO_SERIAL}' {port}"),
        };
        // The guardian shell runs the server and kills it as soon as its
        // stdin closes: when we drop it, or when this process dies.
        let script = format!(
            "'{program}' {args} >/dev/null 2>&1 & pid=$!; echo started; cat >/dev/null; kill -9 $pid; wait $pid"
        );
        let mut guardian = Command::new("sh")
            .arg("-c")
            .arg(script)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot run sh to start {program}: {e}"));
        let mut line = String::new();
        BufReader::new(guardian.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let stdin = guardian.stdin.take().unwrap();
        let server = Private {
            port,
            _reserved: reserved,
            guardian: Some((guardian, stdin)),
        };
        let url = server.url();
        let deadline = std::time::Instant::now() + Duration::from_secs(60);
        loop {
            let ready = std::thread::spawn({
                let url = url.clone();
                move || {
                    tokio::runtime::Builder::new_current_thread()
                        .enable_all()
                        .build()
                        .unwrap()
                        .block_on(answers(&url))
                }
            })
            .join()
            .unwrap();
            if ready {
                return server;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "{program} did not start on port {port}: {install}"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    pub(crate) fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }
}

impl Drop for Private {
    fn drop(&mut self) {
        if let Some((mut guardian, stdin)) = self.guardian.take() {
            drop(stdin);
            let _ = guardian.wait();
        }
    }
}

/// moto's `moto_server` app, one request at a time: its tables check a
/// condition and write without a lock, so two concurrent requests could
/// both pass one condition. Connections are still served by threads
/// (HTTP/1.1 keep-alive), each request under one lock.
const MOTO_SERIAL: &str = "import os, sys, threading; os.environ[\"MOTO_PORT\"] = sys.argv[1]
from werkzeug.serving import run_simple
from moto.moto_server.werkzeug_app import DomainDispatcherApplication, create_backend_app
app = DomainDispatcherApplication(create_backend_app)
lock = threading.Lock()
def serial(environ, start_response):
    with lock:
        return list(app(environ, start_response))
run_simple(\"127.0.0.1\", int(sys.argv[1]), serial, threaded=True)";

/// The `dynoxide` binary: on `PATH`, else where `cargo install` puts it.
fn dynoxide() -> String {
    let on_path = Command::new("dynoxide")
        .arg("--version")
        .output()
        .is_ok_and(|out| out.status.success());
    if on_path {
        return "dynoxide".to_owned();
    }
    let cargo_home = std::env::var_os("CARGO_HOME")
        .map(std::path::PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| std::path::PathBuf::from(h).join(".cargo")));
    match cargo_home.map(|dir| dir.join("bin/dynoxide")) {
        Some(path) if path.is_file() => path.display().to_string(),
        _ => "dynoxide".to_owned(),
    }
}
