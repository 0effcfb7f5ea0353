//! The conformance suite on `RedisStore`, and what is particular to Redis:
//! key layout, expiry by `PX`, the script cache, two processes racing.
//! Faults (a killed server, a closed port) are in `tests/all/redis_fault.rs`.

use crate::support::redis_server;
use crate::support::test_name;

use std::time::Duration;

use idem::key::RecordKey;
use idem::{Error, Idempotency, RedisStore};

async fn store() -> RedisStore {
    RedisStore::connect(&redis_server::url().await)
        .await
        .expect("connect to Redis")
}

// Every case, the takeover ones included: a lapsed claim's key outlives
// its lease, so the next claim is told it took over.
idem_conformance::suite!(async { Idempotency::new(store().await) });

/// A store under a prefix of its own (`name-<random>:`), and the prefix.
async fn store_under(name: &str) -> (RedisStore, String) {
    let prefix = format!(
        "{name}-{:x}:",
        idem::store::Token::random().to_u128() as u32
    );
    let store = RedisStore::builder()
        .prefix(&prefix)
        .connect(&redis_server::url().await)
        .await
        .unwrap();
    (store, prefix)
}

async fn raw() -> redis::aio::MultiplexedConnection {
    let client = redis::Client::open(redis_server::url().await).unwrap();
    client.get_multiplexed_async_connection().await.unwrap()
}

#[tokio::test]
async fn keys_are_prefixed_hashed_and_expire_by_px() {
    let (store, prefix) = store_under("idem-test").await;
    let idem = Idempotency::new(store.clone());
    let raw_key = "customer-secret-key-with-any-bytes \u{1F600}\0";
    let out: Result<String, Error> = idem
        .call("scope", raw_key)
        .ttl(Duration::from_secs(60))
        .run(|| async { Ok("v".repeat(200)) })
        .await;
    out.unwrap();

    let mut conn = raw().await;
    let keys: Vec<Vec<u8>> = redis::cmd("KEYS")
        .arg(format!("{prefix}*"))
        .query_async(&mut conn)
        .await
        .unwrap();
    assert_eq!(keys.len(), 1);
    assert_eq!(keys[0], store.redis_key(&RecordKey::new("scope", raw_key)));
    assert_eq!(keys[0].len(), prefix.len() + 32);
    let value: Vec<u8> = redis::cmd("GET")
        .arg(&keys[0])
        .query_async(&mut conn)
        .await
        .unwrap();
    assert!(
        !value.windows(8).any(|w| w == b"customer"),
        "the raw key was stored"
    );
    let pttl: i64 = redis::cmd("PTTL")
        .arg(&keys[0])
        .query_async(&mut conn)
        .await
        .unwrap();
    assert!(pttl > 55_000 && pttl <= 60_000, "PTTL {pttl}");
    let bytes: i64 = redis::cmd("MEMORY")
        .arg("USAGE")
        .arg(&keys[0])
        .query_async(&mut conn)
        .await
        .unwrap();
    println!("MEMORY USAGE of a record holding a 200-byte value: {bytes} bytes");
    assert!(bytes < 512, "record takes {bytes} bytes");
    let _: () = redis::cmd("DEL")
        .arg(&keys[0])
        .query_async(&mut conn)
        .await
        .unwrap();
}

/// An in-progress value as another host's `RedisStore` writes it: `P`,
/// token, fingerprint, the claim's time and lease (Unix milliseconds by
/// that host's clock), the call site.
fn claim_value(at_ms: u64, lease_ms: u64) -> Vec<u8> {
    use idem::fingerprint::Fingerprint;
    let mut value = b"P".to_vec();
    value.extend_from_slice(&idem::store::Token::random().to_bytes());
    value.extend_from_slice(Fingerprint::NONE.as_bytes());
    value.extend_from_slice(&at_ms.to_be_bytes());
    value.extend_from_slice(&lease_ms.to_be_bytes());
    value.extend_from_slice(b"elsewhere");
    value
}

fn unix_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
}

/// A claim answered without a `PTTL` estimates the holder's lease from
/// its value, but Redis's clock judges a lapse: a value that says its
/// lease ran out (a renewed claim, or a holder whose clock is behind) is
/// answered in progress with the lease Redis counts, and a value that
/// says more than its lease is left (a holder whose clock is ahead) does
/// not keep a claim Redis let lapse.
#[tokio::test]
async fn redis_clock_judges_a_lease_the_claims_value_misjudges() {
    use idem::Store;
    use idem::fingerprint::Fingerprint;
    use idem::store::{Claim, ClaimOutcome, Token};
    let store = store().await;
    let scope = idem_conformance::scope("estimate");
    let day_ms = 24 * 60 * 60 * 1000;
    let mut conn = raw().await;
    let claim = Claim::new(
        Token::random(),
        Fingerprint::NONE,
        Duration::from_secs(30),
        "redis-test",
    );
    // Says lapsed an hour ago; Redis holds its lease 20 s more.
    let renewed = RecordKey::new(&scope, "renewed");
    let value = claim_value(unix_ms() - 3_600_000, 30_000);
    let _: () = redis::cmd("SET")
        .arg(store.redis_key(&renewed))
        .arg(&value)
        .arg("PX")
        .arg(day_ms + 20_000)
        .query_async(&mut conn)
        .await
        .unwrap();
    match store.claim(&renewed, &claim).await.unwrap() {
        ClaimOutcome::InProgress { retry_after, .. } => {
            assert!(retry_after > Duration::from_secs(15), "{retry_after:?}");
            assert!(retry_after <= Duration::from_secs(20), "{retry_after:?}");
        }
        other => panic!("expected in progress, got {other:?}"),
    }
    // Says an hour more than its lease is left; Redis let it lapse.
    let ahead = RecordKey::new(&scope, "ahead");
    let value = claim_value(unix_ms() + 3_600_000, 30_000);
    let _: () = redis::cmd("SET")
        .arg(store.redis_key(&ahead))
        .arg(&value)
        .arg("PX")
        .arg(day_ms - 1_000)
        .query_async(&mut conn)
        .await
        .unwrap();
    match store.claim(&ahead, &claim).await.unwrap() {
        ClaimOutcome::Won { took_over, .. } => assert!(took_over),
        other => panic!("expected a takeover, got {other:?}"),
    }
}

/// A record past its TTL whose tombstone's marker stands lists, inspects
/// and counts as a tombstone (a live record's marker is not listed apart).
#[tokio::test]
async fn admin_lists_counts_and_inspects_tombstones() {
    use idem::Store;
    use idem::admin::{Admin, ListFilter, RecordState};
    let (store, _) = store_under("idem-tomb").await;
    let idem = Idempotency::new(store.clone());
    let pay = |key: &'static str, ttl: Duration| {
        idem.call("tomb", key)
            .ttl(ttl)
            .tombstone(Duration::from_secs(60))
            .run(|| async { Ok::<_, Error>(String::from("charged")) })
    };
    pay("o-1", Duration::from_millis(300)).await.unwrap();
    pay("o-2", Duration::from_secs(3600)).await.unwrap();
    tokio::time::sleep(Duration::from_millis(800)).await;
    let key = RecordKey::new("tomb", "o-1");
    let info = store.inspect(&key).await.unwrap().expect("the tombstone");
    assert_eq!(info.state, RecordState::Tombstone);
    let left = info.expires_in.expect("the tombstone's time left");
    assert!(
        left > Duration::from_secs(55) && left <= Duration::from_secs(60),
        "{left:?}"
    );
    assert!(info.age >= Duration::from_millis(800), "{:?}", info.age);
    let listed = store.list(&ListFilter::default()).await.unwrap();
    let states: Vec<_> = listed.iter().map(|info| (info.key, info.state)).collect();
    assert_eq!(listed.len(), 2, "{states:?}");
    assert!(
        states.contains(&(key, RecordState::Tombstone)),
        "{states:?}"
    );
    let live = RecordKey::new("tomb", "o-2");
    assert!(
        states.contains(&(live, RecordState::Completed)),
        "{states:?}"
    );
    let stats = store.stats().await.unwrap();
    assert_eq!((stats.tombstones, stats.completed), (1, 1));
    store.forget(&key).await.unwrap();
    assert!(store.inspect(&key).await.unwrap().is_none());
}

#[tokio::test]
async fn a_flushed_script_cache_is_reloaded() {
    let idem = Idempotency::new(store().await);
    let scope = idem_conformance::scope("flush");
    let first: Result<u8, Error> = idem.call(&scope, "k").run(|| async { Ok(1) }).await;
    first.unwrap();
    let mut conn = raw().await;
    let _: () = redis::cmd("SCRIPT")
        .arg("FLUSH")
        .query_async(&mut conn)
        .await
        .unwrap();
    let again: Result<u8, Error> = idem.call(&scope, "k").run(|| async { Ok(2) }).await;
    assert_eq!(again.unwrap(), 1);
    let other: Result<u8, Error> = idem.call(&scope, "k2").run(|| async { Ok(3) }).await;
    assert_eq!(other.unwrap(), 3);
}

const RACE_SCOPE: &str = "IDEM_RACE_SCOPE";
const RACE_KEYS: u32 = 1000;

/// Two OS processes race on the same 1,000 keys through one Redis; each
/// body runs exactly once in total, counted in Redis by the bodies
/// themselves.
#[tokio::test]
async fn two_processes_race_on_1000_keys() {
    let url = redis_server::url().await;
    let scope = idem_conformance::scope("race");
    let spawn = || {
        std::process::Command::new(std::env::current_exe().unwrap())
            .args([
                "--exact",
                test_name(module_path!(), "race_worker").as_str(),
                "--nocapture",
                "--test-threads",
                "1",
            ])
            .env(RACE_SCOPE, &scope)
            .env("IDEM_TEST_REDIS_URL", &url)
            .stdout(std::process::Stdio::null())
            .spawn()
            .expect("spawn worker")
    };
    let workers = [spawn(), spawn()];
    for mut worker in workers {
        assert!(worker.wait().unwrap().success(), "a worker failed");
    }
    let mut conn = raw().await;
    let keys: Vec<String> = (0..RACE_KEYS).map(|k| format!("{scope}:ran:{k}")).collect();
    let counts: Vec<Option<u32>> = redis::cmd("MGET")
        .arg(&keys)
        .query_async(&mut conn)
        .await
        .unwrap();
    let ran: u32 = counts.iter().map(|c| c.unwrap_or(0)).sum();
    assert_eq!(
        ran, RACE_KEYS,
        "bodies ran {ran} times for {RACE_KEYS} keys"
    );
    assert!(
        counts.iter().all(|c| *c == Some(1)),
        "a key ran twice or never"
    );
    let by: Vec<Option<String>> = redis::cmd("MGET")
        .arg(
            (0..RACE_KEYS)
                .map(|k| format!("{scope}:by:{k}"))
                .collect::<Vec<_>>(),
        )
        .query_async(&mut conn)
        .await
        .unwrap();
    let first = by
        .iter()
        .filter(|p| p.as_deref() == by[0].as_deref())
        .count();
    println!("worker of key 0 ran {first} of {RACE_KEYS} bodies");
    let _: () = redis::cmd("DEL")
        .arg(&keys)
        .query_async(&mut conn)
        .await
        .unwrap();
}

/// The child side of `two_processes_race_on_1000_keys`: does nothing
/// unless that test started this process with `IDEM_RACE_SCOPE` set.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn race_worker() {
    let Ok(scope) = std::env::var(RACE_SCOPE) else {
        return;
    };
    let idem = Idempotency::new(store().await);
    let me = std::process::id().to_string();
    let conn = raw().await;
    let calls = (0..RACE_KEYS).map(|k| {
        let (idem, scope, me, mut conn) = (idem.clone(), scope.clone(), me.clone(), conn.clone());
        async move {
            let out: Result<u32, Error> = idem
                .call(&scope, &k)
                .wait(Duration::from_secs(30))
                .run(|| async move {
                    let _: () = redis::pipe()
                        .incr(format!("{scope}:ran:{k}"), 1)
                        .set(format!("{scope}:by:{k}"), &me)
                        .query_async(&mut conn)
                        .await
                        .map_err(|e| Error::Store(idem::StoreError::new("test", e)))?;
                    Ok(k)
                })
                .await;
            assert_eq!(out.unwrap(), k);
        }
    });
    use futures::StreamExt;
    futures::stream::iter(calls)
        .buffer_unordered(16)
        .collect::<Vec<()>>()
        .await;
}
