//! The conformance suite on a private three-master Redis Cluster on
//! loopback, started once for this test binary from `redis-server
//! --cluster-enabled yes` and `redis-cli --cluster create`.

#[path = "support/cluster.rs"]
mod cluster;
#[path = "support/redis_server.rs"]
mod redis_server;

use idem::{Idempotency, RedisStore};
use redis_server::PrivateRedis;

/// The cluster's node URLs.
async fn nodes() -> Vec<String> {
    cluster::nodes(PrivateRedis::start).await
}

// Every case, the takeover ones included.
idem_conformance::suite!(async {
    let store = RedisStore::builder()
        .connect_cluster(nodes().await)
        .await
        .expect("connect to the cluster");
    Idempotency::new(store)
});

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
