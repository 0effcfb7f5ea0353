//! The conformance suite on `RedisStore` over Valkey 9 (a private
//! `valkey-server` of this test process; see `support/valkey_server.rs`),
//! and what is particular to a server with native compare-and-set.

use crate::support::redis_server;
use crate::support::valkey_server;

use std::time::Duration;

use idem::fingerprint::Fingerprint;
use idem::key::RecordKey;
use idem::store::{ClaimOutcome, Fence, Retention};
use idem::{Error, Idempotency, RedisStore, Store};
use redis_server::PrivateRedis;

async fn store() -> RedisStore {
    RedisStore::connect(&valkey_server::url().await)
        .await
        .expect("connect to the private Valkey")
}

// Every case, the takeover ones included.
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

/// How many times each command ran on the server at `url`, by
/// `INFO commandstats` (`cmdstat_set:calls=3,…`).
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

/// Every script command the server ran.
async fn scripts_run(url: &str) -> u64 {
    let mut total = 0;
    for command in [
        "eval",
        "evalsha",
        "eval_ro",
        "evalsha_ro",
        "fcall",
        "fcall_ro",
    ] {
        total += calls(url, command).await;
    }
    total
}

/// The server's `INFO commandstats`, for a failure's message.
async fn commandstats(url: &str) -> String {
    let client = redis::Client::open(url).unwrap();
    let mut conn = client.get_multiplexed_async_connection().await.unwrap();
    redis::cmd("INFO")
        .arg("commandstats")
        .query_async(&mut conn)
        .await
        .unwrap()
}

fn private_valkey() -> PrivateRedis {
    valkey_server::start(&[])
}

#[tokio::test]
async fn fenced_steps_run_no_script_on_valkey() {
    let server = private_valkey();
    let url = server.url();
    let store = RedisStore::connect(&url).await.unwrap();
    let idem = Idempotency::new(store.clone());
    for n in 0..20u32 {
        let out: Result<u32, Error> = idem.call("fresh", &n).run(|| async move { Ok(n) }).await;
        assert_eq!(out.unwrap(), n);
    }
    let key = RecordKey::new("fenced", "k");
    let fp = Fingerprint::of(&"payload").unwrap();
    let lease = Duration::from_secs(30);
    let claim = idem_conformance::new_claim(fp, lease);
    assert!(matches!(
        store.claim(&key, &claim).await.unwrap(),
        ClaimOutcome::Won { .. }
    ));
    assert_eq!(
        store.renew(&key, claim.token, lease).await.unwrap(),
        Fence::Held
    );
    assert_eq!(store.release(&key, claim.token).await.unwrap(), Fence::Held);
    let claim = idem_conformance::new_claim(fp, lease);
    assert!(matches!(
        store.claim(&key, &claim).await.unwrap(),
        ClaimOutcome::Won { .. }
    ));
    let ttl = Duration::from_secs(60);
    assert_eq!(
        store
            .complete(&key, claim.token, b"rec", Retention::new(ttl))
            .await
            .unwrap(),
        Fence::Held
    );

    assert_eq!(
        scripts_run(&url).await,
        0,
        "a script ran: {}",
        commandstats(&url).await
    );
    assert!(calls(&url, "set").await >= 2 * 20 + 4);
    assert_eq!(calls(&url, "delifeq").await, 1, "release is not DELIFEQ");
}

/// Claims `key` for `lease` and lets the lease run out; the token.
async fn lapsed(store: &RedisStore, key: &RecordKey) -> idem::store::Token {
    let lease = Duration::from_millis(200);
    let claim = idem_conformance::new_claim(Fingerprint::of(&"payload").unwrap(), lease);
    assert!(matches!(
        store.claim(key, &claim).await.unwrap(),
        ClaimOutcome::Won { .. }
    ));
    tokio::time::sleep(lease * 3).await;
    claim.token
}

/// Wins `key` for a long lease; the token.
async fn won(store: &RedisStore, key: &RecordKey) -> idem::store::Token {
    let lease = Duration::from_secs(30);
    let claim = idem_conformance::new_claim(Fingerprint::of(&"payload").unwrap(), lease);
    assert!(matches!(
        store.claim(key, &claim).await.unwrap(),
        ClaimOutcome::Won { .. }
    ));
    claim.token
}

#[tokio::test]
async fn a_late_holder_is_told_lost_or_expired() {
    let server = private_valkey();
    let url = server.url();
    let store = RedisStore::connect(&url).await.unwrap();
    let (lease, ttl) = (Duration::from_secs(1), Duration::from_secs(60));
    let keys: Vec<RecordKey> = (0..3).map(|n| RecordKey::new("late", &n)).collect();
    let late: Vec<_> = futures::future::join_all(keys.iter().map(|key| lapsed(&store, key))).await;

    // Gone, and nobody holds the keys.
    assert_eq!(
        store.renew(&keys[0], late[0], lease).await.unwrap(),
        Fence::Expired
    );
    assert_eq!(
        store.release(&keys[1], late[1]).await.unwrap(),
        Fence::Expired
    );
    assert_eq!(
        store
            .complete(&keys[2], late[2], b"late", Retention::new(ttl))
            .await
            .unwrap(),
        Fence::Expired
    );

    // Taken over by another holder.
    let late: Vec<_> = futures::future::join_all(keys.iter().map(|key| lapsed(&store, key))).await;
    let holders: Vec<_> = futures::future::join_all(keys.iter().map(|key| won(&store, key))).await;
    assert_eq!(
        store.renew(&keys[0], late[0], lease).await.unwrap(),
        Fence::Lost
    );
    assert_eq!(store.release(&keys[1], late[1]).await.unwrap(), Fence::Lost);
    assert_eq!(
        store
            .complete(&keys[2], late[2], b"late", Retention::new(ttl))
            .await
            .unwrap(),
        Fence::Lost
    );
    // The late holders' steps and the takeovers are scripts (a lapse is
    // judged by the server's clock); the live holders' completions are not.
    let before = scripts_run(&url).await;
    for (key, holder) in keys.iter().zip(&holders) {
        assert_eq!(
            store
                .complete(key, *holder, b"rec", Retention::new(ttl))
                .await
                .unwrap(),
            Fence::Held
        );
    }
    assert_eq!(
        scripts_run(&url).await,
        before,
        "a live holder's completion ran a script: {}",
        commandstats(&url).await
    );
    let fp = Fingerprint::of(&"payload").unwrap();
    let again = idem_conformance::new_claim(fp, lease);
    let ClaimOutcome::Completed { record, .. } = store.claim(&keys[2], &again).await.unwrap()
    else {
        panic!("the holder's record was not kept");
    };
    assert_eq!(&record[..], b"rec");
}

#[tokio::test]
async fn a_claim_won_by_another_store_completes_by_script() {
    let server = private_valkey();
    let url = server.url();
    let claimer = RedisStore::connect(&url).await.unwrap();
    let completer = RedisStore::connect(&url).await.unwrap();
    let key = RecordKey::new("two-stores", "k");
    let fp = Fingerprint::of(&"payload").unwrap();
    let claim = idem_conformance::new_claim(fp, Duration::from_secs(30));
    assert!(matches!(
        claimer.claim(&key, &claim).await.unwrap(),
        ClaimOutcome::Won { .. }
    ));
    let ttl = Duration::from_secs(60);
    assert_eq!(
        completer
            .complete(&key, claim.token, b"rec", Retention::new(ttl))
            .await
            .unwrap(),
        Fence::Held
    );
    // The completer kept no claim value: its completion was a script.
    assert!(scripts_run(&url).await >= 1);
    // The claimer's kept value no longer matches: its completion is fenced.
    assert_eq!(
        claimer
            .complete(&key, claim.token, b"rec", Retention::new(ttl))
            .await
            .unwrap(),
        Fence::Lost
    );
}

#[tokio::test]
async fn a_failover_to_redis_7_falls_back_to_scripts() {
    let mut server = private_valkey();
    let store = RedisStore::connect(&server.url()).await.unwrap();
    let key = RecordKey::new("failover", "k");
    let fp = Fingerprint::of(&"payload").unwrap();
    let lease = Duration::from_secs(30);
    let claim = idem_conformance::new_claim(fp, lease);
    assert!(matches!(
        store.claim(&key, &claim).await.unwrap(),
        ClaimOutcome::Won { .. }
    ));
    server.restart_as("redis-server", &[]);
    // The first renewals may meet the lost connection; once through, Redis
    // 7 refuses `SET … IFEQ` and the script answers: the claim is gone.
    let mut renewed = None;
    for _ in 0..50 {
        match store.renew(&key, claim.token, lease).await {
            Ok(fence) => {
                renewed = Some(fence);
                break;
            }
            Err(_) => tokio::time::sleep(Duration::from_millis(100)).await,
        }
    }
    assert_eq!(renewed, Some(Fence::Expired));
    let ttl = Duration::from_secs(60);
    assert_eq!(
        store
            .complete(&key, claim.token, b"rec", Retention::new(ttl))
            .await
            .unwrap(),
        Fence::Expired
    );
    let again = idem_conformance::new_claim(fp, lease);
    assert!(matches!(
        store.claim(&key, &again).await.unwrap(),
        ClaimOutcome::Won { .. }
    ));
    assert_eq!(
        store
            .complete(&key, again.token, b"rec", Retention::new(ttl))
            .await
            .unwrap(),
        Fence::Held
    );
    assert!(scripts_run(&server.url()).await >= 3);
}

/// Every command the server ran since its last `CONFIG RESETSTAT`, by
/// name, but the `INFO`, `CONFIG` and `CLIENT` of the connections that
/// read and reset them, and the `TIME` a store reads on connect.
pub(crate) async fn commands_run(url: &str) -> Vec<(String, u64)> {
    let stats = commandstats(url).await;
    stats
        .lines()
        .filter_map(|line| line.strip_prefix("cmdstat_"))
        .filter_map(|line| {
            let (name, rest) = line.split_once(":calls=")?;
            let calls = rest.split(',').next()?.parse().ok()?;
            Some((name.to_owned(), calls))
        })
        .filter(|(name, _)| {
            !["info", "config", "client", "time"]
                .iter()
                .any(|own| name.starts_with(own))
        })
        .collect()
}

pub(crate) async fn reset_stats(url: &str) {
    let client = redis::Client::open(url).unwrap();
    let mut conn = client.get_multiplexed_async_connection().await.unwrap();
    let _: () = redis::cmd("CONFIG")
        .arg("RESETSTAT")
        .query_async(&mut conn)
        .await
        .unwrap();
}

/// The commands a call costs the server, counted by `INFO commandstats`:
/// a fresh call is the claim's `SET … NX GET` and the completion's
/// `SET … IFEQ`; a replay is one command, a `GET` on a store that saw the
/// key completed and the claim's `SET … NX GET` on one that did not,
/// behind a local cache too: the record's lifetime, which the cache keeps
/// it for, is read from the value, with no `PTTL`. No script.
#[tokio::test]
async fn a_fresh_call_is_two_commands_and_a_replay_one() {
    let server = private_valkey();
    let url = server.url();
    let store = RedisStore::connect(&url).await.unwrap();
    let idem = Idempotency::new(store);
    let call = |idem: &Idempotency, n: u32| {
        let idem = idem.clone();
        async move {
            let out: Result<u32, Error> =
                idem.call("counted", &n).run(|| async move { Ok(n) }).await;
            assert_eq!(out.unwrap(), n);
        }
    };
    call(&idem, 1_000).await;
    let calls = 50u32;
    let per_call = |run: Vec<(String, u64)>| {
        let total: u64 = run.iter().map(|(_, n)| n).sum();
        (total as f64 / f64::from(calls), run)
    };
    reset_stats(&url).await;
    for n in 0..calls {
        call(&idem, n).await;
    }
    let (fresh, fresh_run) = per_call(commands_run(&url).await);
    reset_stats(&url).await;
    for n in 0..calls {
        call(&idem, n).await;
    }
    let (replay, replay_run) = per_call(commands_run(&url).await);
    reset_stats(&url).await;
    let elsewhere = Idempotency::new(RedisStore::connect(&url).await.unwrap());
    for n in 0..calls {
        call(&elsewhere, n).await;
    }
    let (replay_elsewhere, elsewhere_run) = per_call(commands_run(&url).await);
    // A store that never saw the keys, behind a local cache: each key
    // replayed twice, the second time from the cache.
    let cached = RedisStore::connect(&url).await.unwrap();
    let cached = Idempotency::builder(cached).local_cache(1_000).build();
    reset_stats(&url).await;
    for n in 0..calls {
        call(&cached, n).await;
        call(&cached, n).await;
    }
    let (cached_replay, cached_run) = per_call(commands_run(&url).await);
    println!(
        "commands per fresh call {fresh}: {fresh_run:?}; per replay {replay}: {replay_run:?}; per replay through a cache, twice {cached_replay}: {cached_run:?}"
    );
    assert_eq!(fresh, 2.0, "{fresh_run:?}");
    assert_eq!(replay, 1.0, "{replay_run:?}");
    assert_eq!(replay_run, [("get".to_owned(), u64::from(calls))]);
    assert_eq!(replay_elsewhere, 1.0, "{elsewhere_run:?}");
    assert_eq!(elsewhere_run, [("set".to_owned(), u64::from(calls))]);
    assert_eq!(cached_replay, 1.0, "{cached_run:?}");
    assert_eq!(cached_run, [("set".to_owned(), u64::from(calls))]);
    let runs = [&fresh_run, &replay_run, &elsewhere_run, &cached_run];
    for (name, _) in runs.into_iter().flatten() {
        assert!(
            !name.starts_with("eval") && !name.starts_with("fcall"),
            "{name}"
        );
    }
}

/// A store's replay of a key it saw completed is a `GET`; once that record
/// is gone, the call reads, then claims and completes as a fresh one:
/// one command more than a fresh call, and the body runs.
#[tokio::test]
async fn a_gone_record_seen_completed_costs_one_read_more() {
    let server = private_valkey();
    let url = server.url();
    let store = RedisStore::connect(&url).await.unwrap();
    let idem = Idempotency::new(store.clone());
    let call = |n: u32| {
        let idem = idem.clone();
        async move {
            let out: Result<u32, Error> = idem.call("gone", "k").run(|| async move { Ok(n) }).await;
            out.unwrap()
        }
    };
    assert_eq!(call(1).await, 1);
    let client = redis::Client::open(url.as_str()).unwrap();
    let mut conn = client.get_multiplexed_async_connection().await.unwrap();
    let _: u32 = redis::cmd("DEL")
        .arg(store.redis_key(&RecordKey::new("gone", "k")))
        .query_async(&mut conn)
        .await
        .unwrap();
    reset_stats(&url).await;
    assert_eq!(call(2).await, 2, "the body runs again");
    let mut run = commands_run(&url).await;
    run.sort();
    assert_eq!(run, [("get".to_owned(), 1), ("set".to_owned(), 2)]);
    reset_stats(&url).await;
    assert_eq!(call(3).await, 2, "then replays");
    assert_eq!(commands_run(&url).await, [("get".to_owned(), 1)]);
}
