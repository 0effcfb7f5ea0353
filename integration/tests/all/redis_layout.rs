//! The values under a record's key as they are read: a completed value
//! holds its expiry (`D`), so a replay reads the record's lifetime without
//! a `PTTL`; a completed value of the earlier layout (`C`, written before
//! the expiry was kept, by a replica of an earlier version during a
//! rolling deployment) is still replayed.

use crate::support::redis_server;
use crate::valkey::{commands_run, reset_stats};

use std::time::Duration;

use idem::fingerprint::Fingerprint;
use idem::key::RecordKey;
use idem::store::{Claim, ClaimOutcome, Token};
use idem::{Error, Idempotency, RedisStore, Store};

async fn store() -> RedisStore {
    RedisStore::connect(&redis_server::url().await)
        .await
        .expect("connect to Redis")
}

async fn raw() -> redis::aio::MultiplexedConnection {
    let client = redis::Client::open(redis_server::url().await).unwrap();
    client.get_multiplexed_async_connection().await.unwrap()
}

fn unix_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
}

/// A claim that asks for the record's lifetime, as a local cache's does.
fn asking_lifetime() -> Claim {
    Claim::new(
        Token::random(),
        Fingerprint::NONE,
        Duration::from_secs(30),
        "redis-test",
    )
    .with_expiry()
}

async fn set_px(key: &[u8], value: &[u8], px_ms: u64) {
    let _: () = redis::cmd("SET")
        .arg(key)
        .arg(value)
        .arg("PX")
        .arg(px_ms)
        .query_async(&mut raw().await)
        .await
        .unwrap();
}

/// The lifetime a claim reads from a completed value is capped by the TTL
/// stored in it, whatever the expiry written by another host says; a
/// record completed through the store reports close to its own TTL.
#[tokio::test]
async fn a_completed_record_reports_no_more_than_its_stored_ttl() {
    let store = store().await;
    let scope = idem_conformance::scope("stored-ttl");
    let key = RecordKey::new(&scope, "k");
    let mut value = b"D".to_vec();
    value.extend_from_slice(Fingerprint::NONE.as_bytes());
    value.extend_from_slice(&1_000u64.to_be_bytes());
    // An expiry an hour away: a host whose clock runs far ahead.
    value.extend_from_slice(&(unix_ms() + 3_600_000).to_be_bytes());
    value.extend_from_slice(b"record");
    set_px(&store.redis_key(&key), &value, 60_000).await;
    match store.claim(&key, &asking_lifetime()).await.unwrap() {
        ClaimOutcome::Completed {
            record, expires_in, ..
        } => {
            assert_eq!(&record[..], b"record");
            assert_eq!(expires_in, Duration::from_secs(1));
        }
        other => panic!("expected the completed record, got {other:?}"),
    }
    let idem = Idempotency::new(store.clone());
    let first: Result<u8, Error> = idem
        .call(&scope, "k2")
        .ttl(Duration::from_secs(60))
        .run(|| async { Ok(1) })
        .await;
    first.unwrap();
    // Another store, which did not complete it: one command, no `PTTL`.
    let elsewhere = self::store().await;
    let k2 = RecordKey::new(&scope, "k2");
    match elsewhere.claim(&k2, &asking_lifetime()).await.unwrap() {
        ClaimOutcome::Completed { expires_in, .. } => {
            assert!(expires_in <= Duration::from_secs(60), "{expires_in:?}");
            assert!(expires_in > Duration::from_secs(50), "{expires_in:?}");
        }
        other => panic!("expected the completed record, got {other:?}"),
    }
}

/// A record completed by an earlier version (`C`: fingerprint, TTL,
/// record; no expiry) is replayed by this one, through a handle with a
/// local cache too; its lifetime is not known without a `PTTL`, so the
/// claim reports none and the cache does not keep it. The body never
/// runs again.
#[tokio::test]
async fn a_record_of_the_earlier_layout_is_replayed() {
    let store = store().await;
    let scope = idem_conformance::scope("earlier-layout");
    let idem = Idempotency::new(store.clone());
    let call = |idem: Idempotency, n: u32| {
        let scope = scope.clone();
        async move {
            let out: Result<u32, Error> = idem.call(&scope, "k").run(|| async move { Ok(n) }).await;
            out.unwrap()
        }
    };
    assert_eq!(call(idem.clone(), 1).await, 1);
    // The same record, rewritten as an earlier version wrote it.
    let key = RecordKey::new(&scope, "k");
    let redis_key = store.redis_key(&key);
    let written: Vec<u8> = redis::cmd("GET")
        .arg(&redis_key)
        .query_async(&mut raw().await)
        .await
        .unwrap();
    assert_eq!(written[0], b'D', "the value layout this version writes");
    let earlier = [b"C".as_slice(), &written[1..41], &written[49..]].concat();
    set_px(&redis_key, &earlier, 60_000).await;

    for handle in [
        Idempotency::new(self::store().await),
        Idempotency::builder(self::store().await)
            .local_cache(10)
            .build(),
        idem,
    ] {
        assert_eq!(call(handle.clone(), 2).await, 1, "replayed");
        assert_eq!(call(handle, 3).await, 1, "replayed again");
    }
    match store.claim(&key, &asking_lifetime()).await.unwrap() {
        ClaimOutcome::Completed { expires_in, .. } => assert_eq!(expires_in, Duration::ZERO),
        other => panic!("expected the completed record, got {other:?}"),
    }
    let still: Vec<u8> = redis::cmd("GET")
        .arg(&redis_key)
        .query_async(&mut raw().await)
        .await
        .unwrap();
    assert_eq!(still, earlier, "a replay leaves the record as it was");
}

/// On Redis 7 too, a replay by a store that never saw the key, behind a
/// local cache, is the claim's one command (`SET … NX GET`, no `PTTL`),
/// and the cache keeps the record for the lifetime read from the value.
#[tokio::test]
async fn a_replay_for_a_cache_is_one_command_on_redis_7() {
    let server = redis_server::PrivateRedis::start(&[]);
    let url = server.url();
    let first = Idempotency::new(RedisStore::connect(&url).await.unwrap());
    let call = |idem: &Idempotency, n: u32| {
        let idem = idem.clone();
        async move {
            let out: Result<u32, Error> = idem.call("once", &n).run(|| async move { Ok(n) }).await;
            out.unwrap()
        }
    };
    let calls = 20u32;
    for n in 0..calls {
        assert_eq!(call(&first, n).await, n);
    }
    let unseen = RedisStore::connect(&url).await.unwrap();
    let cached = Idempotency::builder(unseen).local_cache(100).build();
    reset_stats(&url).await;
    for n in 0..calls {
        assert_eq!(call(&cached, n).await, n);
        assert_eq!(call(&cached, n).await, n);
    }
    assert_eq!(
        commands_run(&url).await,
        [("set".to_owned(), u64::from(calls))]
    );
}
