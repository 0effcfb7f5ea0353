//! A private three-master cluster on loopback for a test module, started
//! once from `--cluster-enabled yes` servers and `redis-cli --cluster
//! create`: the same for Redis and Valkey, whose node is `start`.

#![allow(dead_code)]

use std::process::Command;
use std::time::{Duration, Instant};

use tokio::sync::OnceCell;

use super::redis_server::PrivateRedis;

/// The cluster's node URLs, the nodes made by `start` (given their extra
/// arguments) on first use and kept in `cluster`, the caller's: one
/// cluster per kind of server in the process. The servers live as long as
/// the process.
pub(crate) async fn nodes(
    cluster: &'static OnceCell<Vec<String>>,
    start: fn(&[&str]) -> PrivateRedis,
) -> Vec<String> {
    cluster
        .get_or_init(|| async {
            tokio::task::spawn_blocking(move || start_cluster(start))
                .await
                .unwrap()
        })
        .await
        .clone()
}

fn start_cluster(start: fn(&[&str]) -> PrivateRedis) -> Vec<String> {
    let servers: Vec<PrivateRedis> = (0..3)
        .map(|_| start(&["--cluster-enabled", "yes", "--cluster-node-timeout", "2000"]))
        .collect();
    let addrs: Vec<String> = servers
        .iter()
        .map(|s| format!("127.0.0.1:{}", s.port))
        .collect();
    let status = Command::new("redis-cli")
        .args(["--cluster", "create"])
        .args(&addrs)
        .args(["--cluster-replicas", "0", "--cluster-yes"])
        .stdout(std::process::Stdio::null())
        .status()
        .expect("redis-cli not found: install redis-tools (Debian: apt-get install redis-tools)");
    assert!(status.success(), "redis-cli --cluster create failed");
    let deadline = Instant::now() + Duration::from_secs(20);
    for addr in &addrs {
        loop {
            let info = Command::new("redis-cli")
                .args(["-u", &format!("redis://{addr}"), "cluster", "info"])
                .output()
                .unwrap();
            if String::from_utf8_lossy(&info.stdout).contains("cluster_state:ok") {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "the cluster did not become ready"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }
    let urls = servers.iter().map(|s| s.url()).collect();
    // The guardians stop the servers when this process exits.
    std::mem::forget(servers);
    urls
}

/// Sixty calls through a store on the cluster of `nodes` leave records on
/// every master: the keys spread over the hash slots.
pub(crate) async fn assert_records_spread(nodes: Vec<String>) {
    let idem = idem::Idempotency::new(
        idem::RedisStore::builder()
            .connect_cluster(nodes.clone())
            .await
            .unwrap(),
    );
    let scope = idem_conformance::scope("spread");
    for k in 0..60u32 {
        let out: Result<u32, idem::Error> =
            idem.call(&scope, &k).run(|| async move { Ok(k) }).await;
        out.unwrap();
    }
    for node in nodes {
        let client = redis::Client::open(node.as_str()).unwrap();
        let mut conn = client.get_multiplexed_async_connection().await.unwrap();
        let keys: i64 = redis::cmd("DBSIZE").query_async(&mut conn).await.unwrap();
        assert!(keys > 0, "node {node} holds no record");
    }
}
