//! The conformance suite on a private three-master Redis Cluster on
//! loopback, started once for this test module from `redis-server
//! --cluster-enabled yes` and `redis-cli --cluster create`.

use crate::support::cluster;
use crate::support::redis_server;

use idem::{Idempotency, RedisStore};
use redis_server::PrivateRedis;

/// The cluster's node URLs.
async fn nodes() -> Vec<String> {
    static CLUSTER: tokio::sync::OnceCell<Vec<String>> = tokio::sync::OnceCell::const_new();
    cluster::nodes(&CLUSTER, PrivateRedis::start).await
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
    cluster::assert_records_spread(nodes().await).await;
}
