//! The conformance suite on a private three-master Redis Cluster on
//! loopback, started once for this test binary from `redis-server
//! --cluster-enabled yes` and `redis-cli --cluster create`.

#[path = "support/redis_server.rs"]
mod redis_server;

use std::process::Command;
use std::time::{Duration, Instant};

use idem::{Idempotency, RedisStore};
use redis_server::PrivateRedis;
use tokio::sync::OnceCell;

/// The cluster's node URLs. The servers live as long as the process.
async fn nodes() -> Vec<String> {
    static CLUSTER: OnceCell<Vec<String>> = OnceCell::const_new();
    CLUSTER
        .get_or_init(|| async { tokio::task::spawn_blocking(start_cluster).await.unwrap() })
        .await
        .clone()
}

fn start_cluster() -> Vec<String> {
    let servers: Vec<PrivateRedis> = (0..3)
        .map(|_| {
            PrivateRedis::start(&["--cluster-enabled", "yes", "--cluster-node-timeout", "2000"])
        })
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

// Every case but the three that need `took_over`, which the Redis store
// cannot report yet (see `tests/redis.rs`).
idem_conformance::suite!(async {
    let store = RedisStore::builder()
        .connect_cluster(nodes().await)
        .await
        .expect("connect to the cluster");
    Idempotency::new(store)
}; without_takeover);

#[tokio::test]
async fn records_spread_over_every_master() {
    let nodes = nodes().await;
    let idem = Idempotency::new(
        RedisStore::builder()
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
