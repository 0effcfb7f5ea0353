//! Each store operation is one atomic round trip, pinned on the wire: a counting TCP proxy sits
//! between idem and a real Redis, a real PostgreSQL and a real MySQL (or
//! MariaDB), and each kind of
//! call must cost exactly: fresh key 2 turns (claim, complete), replay 1,
//! in-progress answer 1, released error 2 (claim, release: release is 1),
//! a replay through a local cache that reads the store 1 (on Redis from a
//! store that never saw the key), and one that hits the cache 0. Each recovery point
//! (`idem::step`) costs one more turn, and a claim that resumes over saved
//! steps reads them in its own turn.

use crate::support::redis_server;
use crate::support::sql;
use crate::support::sql_mysql;
use crate::support::sql_pg;

use idem::store::Token;
use idem::{Error, Idempotency, RedisStore};
use sql::SqlServer;
use sql::turn_proxy::TurnProxy;
use sql::turns::proxied;
use sql_mysql::MySqlServer;
use sql_pg::Pg;

/// Turns taken by each kind of call through `proxied`; `cached` is a
/// proxied store behind a local cache; `direct` reaches the same
/// records without the proxy, to hold a claim.
async fn count(
    proxy: &TurnProxy,
    proxied: &Idempotency,
    cached: &Idempotency,
    direct: &Idempotency,
) -> [usize; 6] {
    let scope = format!("turns-{:x}", Token::random().to_u128() as u64);
    let fresh = |key: &'static str| {
        proxied
            .call(&scope, key)
            .run(|| async { Ok::<_, Error>(1u8) })
    };
    let failing = |key: &'static str| {
        proxied
            .call(&scope, key)
            .run(|| async { Err::<u8, _>(Error::NotConfigured) })
    };
    // Warm up: connections made, statements prepared, scripts loaded.
    fresh("warm").await.unwrap();
    fresh("warm").await.unwrap();
    failing("warm-err").await.unwrap_err();
    proxy.take().await;

    fresh("k").await.unwrap();
    let fresh_turns = proxy.take().await;
    fresh("k").await.unwrap();
    let replay_turns = proxy.take().await;

    let (tx, rx) = tokio::sync::oneshot::channel();
    let (done_tx, done_rx) = tokio::sync::oneshot::channel::<()>();
    let holder = {
        let (direct, scope) = (direct.clone(), scope.clone());
        tokio::spawn(async move {
            direct
                .call(&scope, "busy")
                .run(|| async {
                    tx.send(()).unwrap();
                    done_rx.await.unwrap();
                    Ok::<_, Error>(0u8)
                })
                .await
        })
    };
    rx.await.unwrap();
    proxy.take().await;
    let busy = fresh("busy").await;
    assert!(matches!(busy, Err(Error::InProgress { .. })), "{busy:?}");
    let in_progress_turns = proxy.take().await;
    done_tx.send(()).unwrap();
    holder.await.unwrap().unwrap();

    proxy.take().await;
    failing("err").await.unwrap_err();
    let released_turns = proxy.take().await;

    // The first replay through the cache reads the store and fills it.
    let through_cache = || {
        cached
            .call(&scope, "k")
            .run(|| async { Ok::<_, Error>(2u8) })
    };
    proxy.take().await;
    assert_eq!(through_cache().await.unwrap(), 1);
    let read_for_cache_turns = proxy.take().await;
    assert_eq!(through_cache().await.unwrap(), 1);
    let cached_turns = proxy.take().await;
    [
        fresh_turns,
        replay_turns,
        in_progress_turns,
        released_turns,
        read_for_cache_turns,
        cached_turns,
    ]
}

/// A proxy to the test Redis, a store through it, and one that reaches
/// the server directly.
async fn redis_proxied() -> (TurnProxy, RedisStore, RedisStore) {
    let url = redis_server::url().await;
    let upstream = url.trim_start_matches("redis://").trim_end_matches('/');
    let proxy = TurnProxy::start(upstream.to_owned()).await;
    let proxied = RedisStore::connect(&format!("redis://{}", proxy.addr)).await;
    let direct = RedisStore::connect(&url).await.unwrap();
    (proxy, proxied.unwrap(), direct)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_turns_per_call() {
    let (proxy, proxied_store, direct) = redis_proxied().await;
    let direct = Idempotency::new(direct);
    // The cache's store never sees the key completed: its replay is the
    // claim, which reads the record's lifetime from the value.
    let upstream = proxy.addr;
    let unseen = RedisStore::connect(&format!("redis://{upstream}")).await;
    let turns = count(
        &proxy,
        &Idempotency::new(proxied_store),
        &Idempotency::builder(unseen.unwrap())
            .local_cache(100)
            .build(),
        &direct,
    )
    .await;
    println!(
        "redis turns: fresh, replay, in progress, released error, replay read for a cache, cached replay = {turns:?}"
    );
    assert_eq!(turns, [2, 1, 1, 2, 1, 0]);
}

/// Turns per kind of call on a SQL server's store, through a proxy.
async fn sql_turns_per_call<S: SqlServer>(name: &str) {
    let (proxy, proxied, direct) = proxied::<S>("call_turns").await;
    let turns = count(
        &proxy,
        &Idempotency::new(proxied.clone()),
        &Idempotency::builder(proxied).local_cache(100).build(),
        &Idempotency::new(direct),
    )
    .await;
    println!(
        "{name} turns: fresh, replay, in progress, released error, replay read for a cache, cached replay = {turns:?}"
    );
    assert_eq!(turns, [2, 1, 1, 2, 1, 0]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_turns_per_call() {
    sql_turns_per_call::<Pg>("postgres").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mysql_turns_per_call() {
    sql_turns_per_call::<MySqlServer>("mysql").await;
}

/// Turns taken by calls with three steps (`idem::step`): a fresh call, one
/// failing at its third step, its retry (resuming), and a replay of the
/// completed call.
async fn step_turns(proxy: &TurnProxy, proxied: &Idempotency) -> [usize; 4] {
    let scope = format!("step-turns-{:x}", Token::random().to_u128() as u64);
    let call = |key: &'static str, fail_third: bool| {
        proxied.call(&scope, key).run(move || async move {
            let a = idem::step("a", || async { Ok::<_, Error>(1u8) }).await?;
            let b = idem::step("b", || async { Ok::<_, Error>(2u8) }).await?;
            let c = idem::step("c", || async {
                match fail_third {
                    true => Err(Error::NotConfigured),
                    false => Ok(3u8),
                }
            })
            .await?;
            Ok::<_, Error>(a + b + c)
        })
    };
    // Warm up: connections made, statements prepared (the replay's read
    // of a completed record too), scripts loaded.
    call("warm", false).await.unwrap();
    call("warm", false).await.unwrap();
    call("warm-err", true).await.unwrap_err();
    proxy.take().await;

    assert_eq!(call("fresh", false).await.unwrap(), 6);
    let fresh = proxy.take().await;
    call("resumed", true).await.unwrap_err();
    let failed = proxy.take().await;
    assert_eq!(call("resumed", false).await.unwrap(), 6);
    let resumed = proxy.take().await;
    assert_eq!(call("resumed", true).await.unwrap(), 6);
    let replay = proxy.take().await;
    [fresh, failed, resumed, replay]
}

/// Each step costs one turn; a resumed claim reads its steps in its own
/// turn; a completed call replays in one.
const STEP_TURNS: [usize; 4] = [
    2 + 3,     // claim, three saves, complete
    1 + 2 + 1, // claim, two saves, release
    1 + 1 + 1, // claim (with the two saved steps), one save, complete
    1,         // replay
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_turns_per_step() {
    let (proxy, store, _) = redis_proxied().await;
    let turns = step_turns(&proxy, &Idempotency::new(store)).await;
    println!("redis turns with 3 steps: fresh, failed at 3rd, resumed, replay = {turns:?}");
    // A claim reads steps only where a released (or lapsed) claim left
    // them, by a script after its pipeline: the resumed claim takes two
    // turns, so that every other claim sends no steps read at all.
    let [fresh, failed, resumed, replay] = STEP_TURNS;
    assert_eq!(turns, [fresh, failed, resumed + 1, replay]);
}

/// Turns of calls with steps on a SQL server's store, through a proxy.
async fn sql_turns_per_step<S: SqlServer>(name: &str) {
    let (proxy, store, _) = proxied::<S>("step_turns").await;
    let turns = step_turns(&proxy, &Idempotency::new(store)).await;
    println!("{name} turns with 3 steps: fresh, failed at 3rd, resumed, replay = {turns:?}");
    assert_eq!(turns, STEP_TURNS);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_turns_per_step() {
    sql_turns_per_step::<Pg>("postgres").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mysql_turns_per_step() {
    sql_turns_per_step::<MySqlServer>("mysql").await;
}
