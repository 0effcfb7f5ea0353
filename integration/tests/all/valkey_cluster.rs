//! The conformance suite on a private three-master Valkey cluster on
//! loopback (Valkey 9: native compare-and-set), started once for this test
//! module from `valkey-server --cluster-enabled yes` (see
//! `support/valkey_server.rs`) and `redis-cli --cluster create`.

use crate::support::cluster;
use crate::support::valkey_server;

use std::time::Duration;

use idem::Store;
use idem::key::RecordKey;
use idem::store::{ClaimOutcome, Fence};
use idem::{Idempotency, RedisStore};

/// The cluster's node URLs. The servers live as long as the process.
async fn nodes() -> Vec<String> {
    static CLUSTER: tokio::sync::OnceCell<Vec<String>> = tokio::sync::OnceCell::const_new();
    cluster::nodes(&CLUSTER, valkey_server::start).await
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

/// How many times `command` ran on the node at `url` (`INFO commandstats`).
async fn calls(url: &str, command: &str) -> u64 {
    let client = redis::Client::open(url).unwrap();
    let mut conn = client.get_multiplexed_async_connection().await.unwrap();
    let stats: String = redis::cmd("INFO")
        .arg("commandstats")
        .query_async(&mut conn)
        .await
        .unwrap();
    let field = format!("cmdstat_{command}:calls=");
    stats
        .lines()
        .find_map(|line| line.strip_prefix(field.as_str()))
        .and_then(|rest| rest.split(',').next())
        .map_or(0, |n| n.parse().unwrap())
}

#[tokio::test]
async fn releases_are_native_on_every_master() {
    let nodes = nodes().await;
    let store = RedisStore::builder()
        .connect_cluster(nodes.clone())
        .await
        .unwrap();
    let fp = idem::fingerprint::Fingerprint::of(&"payload").unwrap();
    let scope = idem_conformance::scope("native");
    for k in 0..30u32 {
        let key = RecordKey::new(&scope, &k);
        let claim = idem_conformance::new_claim(fp, Duration::from_secs(30));
        assert!(matches!(
            store.claim(&key, &claim).await.unwrap(),
            ClaimOutcome::Won { .. }
        ));
        assert_eq!(store.release(&key, claim.token).await.unwrap(), Fence::Held);
    }
    let mut deletes = 0;
    for node in &nodes {
        let here = calls(node, "delifeq").await;
        assert!(here > 0, "no DELIFEQ on {node}");
        deletes += here;
    }
    // Only a native release sends DELIFEQ (other tests' add to these).
    assert!(deletes >= 30);
}
