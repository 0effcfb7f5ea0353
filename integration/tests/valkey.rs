//! The conformance suite on `RedisStore` over Valkey 9 (a private
//! `valkey-server` of this test process; see `support/valkey_server.rs`),
//! and what is particular to a server with native compare-and-set.

#[path = "support/redis_server.rs"]
mod redis_server;
#[path = "support/valkey_server.rs"]
mod valkey_server;

use idem::{Idempotency, RedisStore};

async fn store() -> RedisStore {
    RedisStore::connect(&valkey_server::url().await)
        .await
        .expect("connect to the private Valkey")
}

idem_conformance::suite!(async { Idempotency::new(store().await) });

async fn raw() -> redis::aio::MultiplexedConnection {
    let client = redis::Client::open(valkey_server::url().await).unwrap();
    client.get_multiplexed_async_connection().await.unwrap()
}

#[tokio::test]
async fn the_server_is_valkey_with_native_compare_and_set() {
    let info: String = redis::cmd("INFO")
        .arg("server")
        .query_async(&mut raw().await)
        .await
        .unwrap();
    let version = info
        .lines()
        .find_map(|line| line.strip_prefix("valkey_version:"))
        .unwrap_or_else(|| panic!("not a Valkey: {info}"));
    let major: u32 = version.split('.').next().unwrap().parse().unwrap();
    assert!(major >= 9, "Valkey {version}: these tests want 9 or later");
}
