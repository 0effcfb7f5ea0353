//! Each store operation is one atomic round trip, pinned on the wire: a counting TCP proxy sits
//! between idem and a real Redis, a real PostgreSQL and a real MySQL (or
//! MariaDB), and each kind of
//! call must cost exactly: fresh key 2 turns (claim, complete), replay 1,
//! in-progress answer 1, released error 2 (claim, release: release is 1),
//! and a replay that hits the local cache 0. Each recovery point
//! (`idem::step`) costs one more turn, and a claim that resumes over saved
//! steps reads them in its own turn.

#[path = "support/mysql_server.rs"]
mod mysql_server;
#[path = "support/pg_server.rs"]
mod pg_server;
#[path = "support/redis_server.rs"]
mod redis_server;
#[path = "support/turn_proxy.rs"]
mod turn_proxy;

use idem::store::Token;
use idem::{Error, Idempotency, MySqlStore, PostgresStore, RedisStore};
use turn_proxy::TurnProxy;

/// Turns taken by each kind of call through `proxied`; `cached` is the
/// same proxied store behind a local cache; `direct` reaches the same
/// records without the proxy, to hold a claim.
async fn count(
    proxy: &TurnProxy,
    proxied: &Idempotency,
    cached: &Idempotency,
    direct: &Idempotency,
) -> [usize; 5] {
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
    assert_eq!(through_cache().await.unwrap(), 1);
    proxy.take().await;
    assert_eq!(through_cache().await.unwrap(), 1);
    let cached_turns = proxy.take().await;
    [
        fresh_turns,
        replay_turns,
        in_progress_turns,
        released_turns,
        cached_turns,
    ]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_turns_per_call() {
    let url = redis_server::url().await;
    let upstream = url
        .trim_start_matches("redis://")
        .trim_end_matches('/')
        .to_owned();
    let proxy = TurnProxy::start(upstream).await;
    let proxied_store = RedisStore::connect(&format!("redis://{}", proxy.addr))
        .await
        .unwrap();
    let direct = Idempotency::new(RedisStore::connect(&url).await.unwrap());
    let turns = count(
        &proxy,
        &Idempotency::new(proxied_store.clone()),
        &Idempotency::builder(proxied_store).local_cache(100).build(),
        &direct,
    )
    .await;
    println!("redis turns: fresh, replay, in progress, released error, cached replay = {turns:?}");
    assert_eq!(turns, [2, 1, 1, 2, 0]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_turns_per_call() {
    let url = pg_server::url().await;
    let schema = pg_server::unique_schema("call_turns");
    let direct_opts: sqlx::postgres::PgConnectOptions = url.parse().unwrap();
    let upstream = format!("{}:{}", direct_opts.get_host(), direct_opts.get_port());
    let proxy = TurnProxy::start(upstream).await;
    let via_proxy = direct_opts
        .clone()
        .host("127.0.0.1")
        .port(proxy.addr.port());
    let proxied_store = PostgresStore::builder()
        .schema(schema.clone())
        .max_connections(1)
        .connect_with(via_proxy)
        .await
        .unwrap();
    proxied_store.migrate().await.unwrap();
    let direct_store = PostgresStore::builder()
        .schema(schema)
        .connect_with(direct_opts)
        .await
        .unwrap();
    let turns = count(
        &proxy,
        &Idempotency::new(proxied_store.clone()),
        &Idempotency::builder(proxied_store).local_cache(100).build(),
        &Idempotency::new(direct_store),
    )
    .await;
    println!(
        "postgres turns: fresh, replay, in progress, released error, cached replay = {turns:?}"
    );
    assert_eq!(turns, [2, 1, 1, 2, 0]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mysql_turns_per_call() {
    let table = mysql_server::unique_table("call_turns");
    let direct_opts: sqlx::mysql::MySqlConnectOptions = mysql_server::url().await.parse().unwrap();
    let upstream = format!("{}:{}", direct_opts.get_host(), direct_opts.get_port());
    let proxy = TurnProxy::start(upstream).await;
    let via_proxy = direct_opts
        .clone()
        .host("127.0.0.1")
        .port(proxy.addr.port());
    let proxied_store = MySqlStore::builder()
        .table(table.clone())
        .max_connections(1)
        .connect_with(via_proxy)
        .await
        .unwrap();
    proxied_store.migrate().await.unwrap();
    let direct_store = MySqlStore::builder()
        .table(table)
        .connect_with(direct_opts)
        .await
        .unwrap();
    let turns = count(
        &proxy,
        &Idempotency::new(proxied_store.clone()),
        &Idempotency::builder(proxied_store).local_cache(100).build(),
        &Idempotency::new(direct_store),
    )
    .await;
    println!("mysql turns: fresh, replay, in progress, released error, cached replay = {turns:?}");
    assert_eq!(turns, [2, 1, 1, 2, 0]);
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
    // Warm up: connections made, statements prepared, scripts loaded.
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
    let url = redis_server::url().await;
    let upstream = url
        .trim_start_matches("redis://")
        .trim_end_matches('/')
        .to_owned();
    let proxy = TurnProxy::start(upstream).await;
    let store = RedisStore::connect(&format!("redis://{}", proxy.addr))
        .await
        .unwrap();
    let turns = step_turns(&proxy, &Idempotency::new(store)).await;
    println!("redis turns with 3 steps: fresh, failed at 3rd, resumed, replay = {turns:?}");
    // A claim reads steps only where a released (or lapsed) claim left
    // them, by a script after its pipeline: the resumed claim takes two
    // turns, so that every other claim sends no steps read at all.
    let [fresh, failed, resumed, replay] = STEP_TURNS;
    assert_eq!(turns, [fresh, failed, resumed + 1, replay]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_turns_per_step() {
    let url = pg_server::url().await;
    let opts: sqlx::postgres::PgConnectOptions = url.parse().unwrap();
    let proxy = TurnProxy::start(format!("{}:{}", opts.get_host(), opts.get_port())).await;
    let store = PostgresStore::builder()
        .schema(pg_server::unique_schema("step_turns"))
        .max_connections(1)
        .connect_with(opts.host("127.0.0.1").port(proxy.addr.port()))
        .await
        .unwrap();
    store.migrate().await.unwrap();
    let turns = step_turns(&proxy, &Idempotency::new(store)).await;
    println!("postgres turns with 3 steps: fresh, failed at 3rd, resumed, replay = {turns:?}");
    assert_eq!(turns, STEP_TURNS);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mysql_turns_per_step() {
    let opts: sqlx::mysql::MySqlConnectOptions = mysql_server::url().await.parse().unwrap();
    let proxy = TurnProxy::start(format!("{}:{}", opts.get_host(), opts.get_port())).await;
    let store = MySqlStore::builder()
        .table(mysql_server::unique_table("step_turns"))
        .max_connections(1)
        .connect_with(opts.host("127.0.0.1").port(proxy.addr.port()))
        .await
        .unwrap();
    store.migrate().await.unwrap();
    let turns = step_turns(&proxy, &Idempotency::new(store)).await;
    println!("mysql turns with 3 steps: fresh, failed at 3rd, resumed, replay = {turns:?}");
    assert_eq!(turns, STEP_TURNS);
}
