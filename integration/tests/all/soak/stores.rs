//! The soak on each store, each on a server of its own behind a proxy.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use idem::{Idempotency, MySqlStore, PostgresStore, RedisStore, SqliteStore};

use super::{blocking, cut, sigstop, soak};
use crate::support::mysql_server;
use crate::support::pg_server::PrivateServer;
use crate::support::redis_server::PrivateRedis;
use crate::support::tcp_gate::TcpGate;

/// "host:port" of a URL without a path or user after the host.
fn host_port(url: &str) -> String {
    let rest = url.split_once('@').map_or(url, |(_, r)| r);
    let rest = rest.split_once("://").map_or(rest, |(_, r)| r);
    rest.split('/').next().unwrap().to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a soak of minutes: scripts/soak"]
async fn postgres() {
    let server = Arc::new(PrivateServer::start());
    let gate = Arc::new(TcpGate::open(host_port(&server.url())).await);
    let url = format!("postgres://postgres@{}/postgres", gate.addr);
    let store = PostgresStore::builder()
        .max_connections(16)
        .connect(&url)
        .await
        .unwrap();
    store.migrate().await.unwrap();
    let (restart, pause) = (server.clone(), server.clone());
    let faults = vec![
        blocking("server restarted", move || {
            restart.stop();
            std::thread::sleep(Duration::from_secs(2));
            restart.restart();
        }),
        cut(&gate),
        blocking("server paused 3 s", move || {
            pause.pause(true);
            std::thread::sleep(Duration::from_secs(3));
            pause.pause(false);
        }),
    ];
    soak(
        "PostgreSQL",
        Idempotency::new(store.clone()),
        Arc::new(store),
        faults,
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a soak of minutes: scripts/soak"]
async fn mysql() {
    let server = mysql_server::PrivateServer::start().await;
    let gate = Arc::new(TcpGate::open(host_port(&server.url())).await);
    let url = format!("mysql://root@{}/test", gate.addr);
    let store = MySqlStore::builder()
        .max_connections(16)
        .connect(&url)
        .await
        .unwrap();
    store.migrate().await.unwrap();
    let pid = std::fs::read_to_string(server.dir().join("pid"))
        .unwrap()
        .trim()
        .to_owned();
    // No restart: the private MariaDB has no restart of its own here.
    let faults = vec![cut(&gate), blocking("server paused 3 s", sigstop(pid))];
    soak(
        "MariaDB",
        Idempotency::new(store.clone()),
        Arc::new(store),
        faults,
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a soak of minutes: scripts/soak"]
async fn redis() {
    // Every write on disk before it is answered, so a restart loses none.
    let server = PrivateRedis::start(&["--appendonly", "yes", "--appendfsync", "always"]);
    let gate = Arc::new(TcpGate::open(format!("127.0.0.1:{}", server.port)).await);
    let store = RedisStore::connect(&format!("redis://{}", gate.addr))
        .await
        .unwrap();
    let server = Arc::new(Mutex::new(server));
    let (restart, pause) = (server.clone(), server.clone());
    let faults = vec![
        blocking("server restarted", move || {
            restart.lock().unwrap().restart()
        }),
        cut(&gate),
        blocking("server paused 3 s", move || {
            let port = pause.lock().unwrap().port;
            let client = redis::Client::open(format!("redis://127.0.0.1:{port}")).unwrap();
            let info: String = redis::cmd("INFO")
                .arg("server")
                .query(&mut client.get_connection().unwrap())
                .unwrap();
            let pid = info
                .lines()
                .find_map(|l| l.strip_prefix("process_id:"))
                .unwrap();
            sigstop(pid.trim().to_owned())();
        }),
    ];
    soak(
        "Redis",
        Idempotency::new(store.clone()),
        Arc::new(store),
        faults,
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a soak of minutes: scripts/soak"]
async fn sqlite() {
    let dir = std::env::temp_dir().join(format!(
        "idem-soak-{:x}",
        idem::store::Token::random().to_u128()
    ));
    std::fs::create_dir_all(&dir).unwrap();
    let store = SqliteStore::open(dir.join("soak.db")).await.unwrap();
    // No server to fault: the traffic alone.
    soak(
        "SQLite",
        Idempotency::new(store.clone()),
        Arc::new(store),
        Vec::new(),
    )
    .await;
}
