//! RedisStore beside raw redis-rs on the same server: the minimum two
//! commands per call, the common GET / SET NX / SET pattern, the crate
//! `idempotent`; for replays raw GET and idem's own claim commands sent by
//! hand. Every subject uses one multiplexed connection.
//!
//! Each scenario notes the server's time per call of each subject by
//! command, from `INFO commandstats` read around the subject's timed calls
//! ([`crate::server_time`]).

use std::future::Future;
use std::sync::Arc;

use idem::{Error, Idempotency, RedisStore};
use redis::aio::ConnectionManager;

use crate::harness::{Report, Runner, idem_runner, measure, runner};
use crate::peer::Peer;

mod commandstats;
use crate::server_time::{ServerTime, on_server, subject};
use commandstats::CommandStats;

type Time = Arc<ServerTime<CommandStats>>;

const LEASE_MS: u64 = 30_000;
const TTL_MS: u64 = 86_400_000;
/// Completed keys the replay scenarios read over and over.
const HOT: u64 = 1_000;
/// Keys a round of the spread replay scenario completes and then replays
/// once each: more than the 16,384 a store remembers as completed, and a
/// multiple of 64, so that a round at concurrency 64 makes every call.
const SPREAD: u64 = 20_480;

/// The raw subjects' key of replay `i`.
fn hot_key(prefix: &str, i: u64) -> String {
    format!("{prefix}hot:{}", i % HOT)
}

fn url() -> String {
    std::env::var("IDEM_TEST_REDIS_URL").unwrap_or_else(|_| "redis://127.0.0.1:6379".into())
}

/// The two commands every dedupe needs at least: claim, then store.
async fn raw_two(mut conn: ConnectionManager, key: String) {
    let claimed: Option<String> = redis::cmd("SET")
        .arg(&key)
        .arg("P")
        .arg("NX")
        .arg("PX")
        .arg(LEASE_MS)
        .query_async(&mut conn)
        .await
        .unwrap();
    if claimed.is_some() {
        let _: Option<String> = redis::cmd("SET")
            .arg(&key)
            .arg("C1")
            .arg("XX")
            .arg("PX")
            .arg(TTL_MS)
            .query_async(&mut conn)
            .await
            .unwrap();
    }
}

/// What services write by hand: look, claim, store (three trips, racy
/// between them).
async fn hand_three(mut conn: ConnectionManager, key: String) {
    let found: Option<String> = redis::cmd("GET")
        .arg(&key)
        .query_async(&mut conn)
        .await
        .unwrap();
    if found.is_none() {
        raw_two(conn, key).await;
    }
}

async fn raw_get(mut conn: ConnectionManager, key: String) {
    let _: Option<Vec<u8>> = redis::cmd("GET")
        .arg(&key)
        .query_async(&mut conn)
        .await
        .unwrap();
}

/// The command of idem's claim, sent by hand: a replay's whole cost in
/// Redis, so that idem's own work on top shows.
async fn raw_claim(mut conn: ConnectionManager, key: String) {
    let _: Option<Vec<u8>> = redis::cmd("SET")
        .arg(&key)
        .arg([b'P'; 65].as_slice())
        .arg("NX")
        .arg("PX")
        .arg(LEASE_MS)
        .arg("GET")
        .query_async(&mut conn)
        .await
        .unwrap();
}

/// A round of `calls` raw calls at `concurrency`: `call(conn, key)` with
/// the key `key_of(prefix, i)`.
fn raw_runner<Fut>(
    conn: &ConnectionManager,
    prefix: &str,
    concurrency: usize,
    calls: u64,
    key_of: fn(&str, u64) -> String,
    call: fn(ConnectionManager, String) -> Fut,
) -> Runner
where
    Fut: Future<Output = ()> + Send + 'static,
{
    let (conn, prefix): (ConnectionManager, Arc<str>) = (conn.clone(), prefix.into());
    runner(move || {
        let (conn, prefix) = (conn.clone(), prefix.clone());
        measure(concurrency, calls, move |i| {
            call(conn.clone(), key_of(&prefix, i))
        })
    })
}

/// A round of spread replays: `SPREAD` keys completed by `complete(key)`,
/// then each replayed once by `replay(key)` at `concurrency`, measured. A
/// round's `measure` numbers its calls consecutively, so `i % SPREAD`
/// names each key once.
fn spread_runner<C, CF, R, RF>(
    concurrency: usize,
    (time, subject): (&Time, &'static str),
    complete: C,
    replay: R,
) -> Runner
where
    C: Fn(u64) -> CF + Send + Sync + Clone + 'static,
    CF: Future<Output = ()> + Send + 'static,
    R: Fn(u64) -> RF + Send + Sync + Clone + 'static,
    RF: Future<Output = ()> + Send + 'static,
{
    static ROUND: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let time = time.clone();
    runner(move || {
        let (complete, replay, time) = (complete.clone(), replay.clone(), time.clone());
        async move {
            let base = ROUND.fetch_add(1, std::sync::atomic::Ordering::Relaxed) * SPREAD;
            measure(concurrency, SPREAD, move |i| complete(base + i % SPREAD)).await;
            let replays = measure(concurrency, SPREAD, move |i| replay(base + i % SPREAD));
            time.over(subject, SPREAD, replays).await
        }
    })
}

/// Spread replays by hand: each key completed by the raw pair, then
/// replayed once by `replay`.
fn raw_spread<Fut>(
    conn: &ConnectionManager,
    prefix: &str,
    timed: (&Time, &'static str),
    replay: fn(ConnectionManager, String) -> Fut,
) -> Runner
where
    Fut: Future<Output = ()> + Send + 'static,
{
    let (conn, prefix): (ConnectionManager, Arc<str>) = (conn.clone(), prefix.into());
    let (conn2, prefix2) = (conn.clone(), prefix.clone());
    spread_runner(
        64,
        timed,
        move |k| raw_two(conn.clone(), format!("{prefix}spread:{k}")),
        move |k| replay(conn2.clone(), format!("{prefix2}spread:{k}")),
    )
}

async fn idem_call(idem: &Idempotency, scope: &str, key: u64) {
    let out: Result<u64, Error> = idem.call(scope, &key).run(|| async move { Ok(key) }).await;
    out.unwrap();
}

pub(crate) async fn run(report: &mut Report) {
    let url = url();
    let run_id = format!("{:x}", idem::store::Token::random().to_u128() as u32);
    let prefix = format!("idem-bench-{run_id}:");
    let store = RedisStore::builder()
        .prefix(&prefix)
        .connect(&url)
        .await
        .expect("Redis for the bench");
    let idem = Idempotency::new(store.clone());
    let keys = store.clone();
    let cached = Idempotency::builder(store).local_cache(10_000).build();
    let client = redis::Client::open(url.as_str()).unwrap();
    let conn = ConnectionManager::new(client.clone()).await.unwrap();
    let scope: Arc<str> = Arc::from(format!("bench-{run_id}"));
    let peer = Arc::new(Peer::connect(client.clone(), &format!("{prefix}peer")).await);

    let time = ServerTime::new(CommandStats(conn.clone()));
    // A round at concurrency 64 lasts about half a second: rounds of a
    // tenth of one moved their ratio by ±10% from run to run.
    for (concurrency, calls) in [(1usize, 2_000u64), (64, 60_000)] {
        let name = format!("redis fresh key, concurrency {concurrency}");
        report
            .scenario(
                &name,
                on_server(
                    &time,
                    calls,
                    vec![
                        (
                            "idem RedisStore",
                            idem_runner(idem.clone(), scope.clone(), concurrency, calls, |i| i),
                        ),
                        (
                            "raw SET NX PX + SET XX PX",
                            raw_runner(
                                &conn,
                                &prefix,
                                concurrency,
                                calls,
                                |p, i| format!("{p}raw:{i}"),
                                raw_two,
                            ),
                        ),
                        (
                            "hand-written GET + SET NX + SET",
                            raw_runner(
                                &conn,
                                &prefix,
                                concurrency,
                                calls,
                                |p, i| format!("{p}hand:{i}"),
                                hand_three,
                            ),
                        ),
                        ("crate idempotent 0.3.0 (Valkey store)", {
                            let peer = peer.clone();
                            runner(move || {
                                let peer = peer.clone();
                                measure(concurrency, calls, move |i| {
                                    let peer = peer.clone();
                                    async move { peer.call(format!("fresh-{i}"), i).await }
                                })
                            })
                        }),
                    ],
                ),
            )
            .await;
        time.report_to(report, &name);
    }

    // Replays: HOT completed keys, read over and over.
    let replays = [(1usize, 4_000u64), (64, 160_000)];
    let replay_name = |concurrency| format!("redis replay, concurrency {concurrency}");
    if replays.iter().any(|(c, _)| report.wants(&replay_name(*c))) {
        for k in 0..HOT {
            idem_call(&idem, &scope, u64::MAX - k).await;
            raw_two(conn.clone(), hot_key(&prefix, k)).await;
            peer.call(format!("hot-{k}"), k).await;
        }
    }
    for (concurrency, calls) in replays {
        let name = replay_name(concurrency);
        report
            .scenario(
                &name,
                on_server(&time, calls, vec![
                    (
                        "idem RedisStore",
                        idem_runner(idem.clone(), scope.clone(), concurrency, calls, |i| {
                            u64::MAX - i % HOT
                        }),
                    ),
                    (
                        "raw GET",
                        raw_runner(&conn, &prefix, concurrency, calls, hot_key, raw_get),
                    ),
                    (
                        "raw SET NX PX GET (idem's claim by hand)",
                        raw_runner(&conn, &prefix, concurrency, calls, hot_key, raw_claim),
                    ),
                    ("crate idempotent 0.3.0 (Valkey store)", {
                        let peer = peer.clone();
                        runner(move || {
                            let peer = peer.clone();
                            measure(concurrency, calls, move |i| {
                                let peer = peer.clone();
                                async move { peer.call(format!("hot-{}", i % HOT), i % HOT).await }
                            })
                        })
                    }),
                    (
                        "idem RedisStore + local cache",
                        idem_runner(cached.clone(), scope.clone(), concurrency, calls, |i| {
                            u64::MAX - i % HOT
                        }),
                    ),
                ]),
            )
            .await;
        time.report_to(report, &name);
    }

    spread_replays(report, &url, &prefix, &idem, &scope, &conn).await;

    if report.wants("redis bytes per record") {
        let out: Result<String, Error> = idem
            .call(&*scope, "bytes-per-record")
            .run(|| async { Ok("v".repeat(200)) })
            .await;
        out.unwrap();
        let key = keys.redis_key(&idem::key::RecordKey::new(&*scope, "bytes-per-record"));
        let bytes: i64 = redis::cmd("MEMORY")
            .arg("USAGE")
            .arg(&key)
            .query_async(&mut conn.clone())
            .await
            .unwrap();
        report.note(format!(
            "redis bytes per record: `MEMORY USAGE` of a record holding a 200-byte String: {bytes} bytes"
        ));
    }

    // Leave nothing behind, on a connection without a response timeout.
    let config = redis::AsyncConnectionConfig::new().set_response_timeout(None);
    let mut conn = client
        .get_multiplexed_async_connection_with_config(&config)
        .await
        .unwrap();
    crate::redis_keys::unlink_prefixed(&mut conn, &prefix).await;
}

/// Replays spread over more keys than a store remembers: each key
/// completed by one store and replayed once by another, as a retry
/// reaches another replica.
async fn spread_replays(
    report: &mut Report,
    url: &str,
    prefix: &str,
    idem: &Idempotency,
    scope: &Arc<str>,
    conn: &ConnectionManager,
) {
    let name = "redis replay of spread keys, concurrency 64";
    if !report.wants(name) {
        return;
    }
    let elsewhere = RedisStore::builder()
        .prefix(prefix)
        .connect(url)
        .await
        .expect("Redis for the bench");
    let cached_elsewhere = Idempotency::builder(elsewhere.clone())
        .local_cache(10_000)
        .build();
    let time = ServerTime::new(CommandStats(conn.clone()));
    let idem_spread = |subject: &'static str, replayer: Idempotency| {
        let (first, scope) = (idem.clone(), scope.clone());
        spread_runner(
            64,
            (&time, subject),
            {
                let scope = scope.clone();
                move |k| {
                    let (idem, scope) = (first.clone(), scope.clone());
                    async move { idem_call(&idem, &scope, k | 1 << 62).await }
                }
            },
            move |k| {
                let (idem, scope) = (replayer.clone(), scope.clone());
                async move { idem_call(&idem, &scope, k | 1 << 62).await }
            },
        )
    };
    report
        .scenario(
            name,
            vec![
                subject("idem RedisStore", |name| {
                    idem_spread(name, Idempotency::new(elsewhere))
                }),
                subject("raw GET", |name| {
                    raw_spread(conn, prefix, (&time, name), raw_get)
                }),
                subject("raw SET NX PX GET (idem's claim by hand)", |name| {
                    raw_spread(conn, prefix, (&time, name), raw_claim)
                }),
                subject("idem RedisStore + local cache", |name| {
                    idem_spread(name, cached_elsewhere)
                }),
            ],
        )
        .await;
    time.report_to(report, name);
}
