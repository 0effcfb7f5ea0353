//! Redis in production: a server that may evict idem's keys is refused
//! (unless allowed, with a warning), and `wait_for_replicas` fails closed
//! without the acknowledgements it asks for. Private servers only.

use crate::support::redis_server;

use crate::support::captured;

use captured::Captured;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use idem::{Error, Idempotency, RedisStore};
use redis_server::PrivateRedis;

#[tokio::test]
async fn an_evicting_policy_is_refused_with_the_way_out() {
    for policy in [
        "volatile-lru",
        "allkeys-lru",
        "volatile-ttl",
        "allkeys-random",
    ] {
        let server = PrivateRedis::start(&["--maxmemory-policy", policy]);
        let refused = RedisStore::connect(&server.url()).await;
        let Err(err) = refused else {
            panic!("{policy} was accepted")
        };
        let text = err.to_string();
        assert!(
            text.contains(policy)
                && text.contains("noeviction")
                && text.contains("allow_eviction()"),
            "{text}"
        );
    }
    let server = PrivateRedis::start(&["--maxmemory-policy", "noeviction"]);
    RedisStore::connect(&server.url())
        .await
        .expect("noeviction is accepted");
}

#[tokio::test]
async fn allow_eviction_accepts_with_a_warning() {
    let captured = Captured::default();
    let subscriber = tracing_subscriber::fmt()
        .with_writer(captured.clone())
        .with_ansi(false)
        .finish();
    let _guard = tracing::subscriber::set_default(subscriber);
    let server = PrivateRedis::start(&["--maxmemory-policy", "volatile-lru"]);
    let store = RedisStore::builder()
        .allow_eviction()
        .connect(&server.url())
        .await
        .expect("allowed");
    let out: Result<u8, Error> = Idempotency::new(store)
        .call("s", "k")
        .run(|| async { Ok(1) })
        .await;
    assert_eq!(out.unwrap(), 1);
    let log = String::from_utf8(captured.bytes()).unwrap();
    assert!(
        log.contains("WARN") && log.contains("volatile-lru"),
        "{log}"
    );
}

#[tokio::test]
async fn waiting_for_a_replica_that_is_not_there_fails_closed() {
    let server = PrivateRedis::start(&[]);
    let store = RedisStore::builder()
        .wait_for_replicas(1, Duration::from_millis(100))
        .connect(&server.url())
        .await
        .unwrap();
    let runs = AtomicUsize::new(0);
    let out: Result<u8, Error> = Idempotency::new(store)
        .call("s", "k")
        .run(|| async {
            runs.fetch_add(1, Ordering::SeqCst);
            Ok(1)
        })
        .await;
    let Err(Error::Store(err)) = out else {
        panic!("{out:?}")
    };
    assert!(err.to_string().contains("0 of the 1 replicas"), "{err}");
    assert_eq!(
        runs.load(Ordering::SeqCst),
        0,
        "the body ran on an unacknowledged claim"
    );
}

#[tokio::test]
async fn with_a_replica_claims_and_completions_are_acknowledged() {
    let primary = PrivateRedis::start(&[]);
    let port = primary.port.to_string();
    let replica = PrivateRedis::start(&["--replicaof", "127.0.0.1", &port]);
    let store = RedisStore::builder()
        .wait_for_replicas(1, Duration::from_secs(2))
        .connect(&primary.url())
        .await
        .unwrap();
    let idem = Idempotency::new(store);
    // The replica needs a moment for its first sync.
    let mut first = Err(Error::NotConfigured);
    for _ in 0..50 {
        first = idem
            .call("s", "k")
            .run(|| async { Ok::<u8, Error>(1) })
            .await;
        if first.is_ok() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(first.unwrap(), 1);
    let replay: Result<u8, Error> = idem.call("s", "k").run(|| async { Ok(2) }).await;
    assert_eq!(replay.unwrap(), 1);
    // A saved step is acknowledged too; the call's released error keeps
    // its step, and a marker in its record key while the step lives.
    let stepped: Result<u8, Error> = idem
        .call("s", "stepped")
        .run(|| async {
            idem::step("one", || async { Ok::<u8, Error>(3) }).await?;
            Err(Error::NotConfigured)
        })
        .await;
    assert!(matches!(stepped, Err(Error::NotConfigured)), "{stepped:?}");

    // The completed record, the step and the marker are on the replica.
    let client = redis::Client::open(replica.url()).unwrap();
    let mut conn = client.get_multiplexed_async_connection().await.unwrap();
    let keys: Vec<Vec<u8>> = redis::cmd("KEYS")
        .arg("idem:*")
        .query_async(&mut conn)
        .await
        .unwrap();
    assert_eq!(keys.len(), 3, "the record, the steps hash and the marker");
}

/// After a reconnect the server may be another one: the policy is read
/// again before the next claim, and a server restarted with an evicting
/// policy on the same port is refused.
#[tokio::test]
async fn the_policy_is_read_again_after_a_reconnect() {
    let mut server = PrivateRedis::start(&["--maxmemory-policy", "noeviction"]);
    let store = RedisStore::builder()
        .connection_timeout(Duration::from_millis(300))
        .response_timeout(Duration::from_millis(300))
        .connect(&server.url())
        .await
        .unwrap();
    let idem = Idempotency::new(store);
    let first: Result<u8, Error> = idem.call("s", "k1").run(|| async { Ok(1) }).await;
    assert_eq!(first.unwrap(), 1);

    // Restarted on the same port, now evicting.
    server.kill();
    let down: Result<u8, Error> = idem.call("s", "k2").run(|| async { Ok(2) }).await;
    assert!(matches!(down, Err(Error::Store(_))), "{down:?}");
    server.restart_with(&["--maxmemory-policy", "allkeys-lru"]);
    let mut out: Result<u8, Error> = Err(Error::NotConfigured);
    for _ in 0..20 {
        out = idem.call("s", "k3").run(|| async { Ok(3) }).await;
        if let Err(Error::Store(err)) = &out
            && err.to_string().contains("allkeys-lru")
        {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let Err(Error::Store(err)) = out else {
        panic!("an evicting server was used after a reconnect: {out:?}")
    };
    assert!(err.to_string().contains("allkeys-lru"), "{err}");
    server.kill();
}
