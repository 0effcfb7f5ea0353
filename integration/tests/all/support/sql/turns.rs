//! Round trips on the wire, counted through a [`TurnProxy`] between a
//! store and its server.

use std::time::Duration;

use idem::Store;
use idem::key::RecordKey;
use idem::store::{ClaimOutcome, Retention, StepId, Token};

use super::turn_proxy::TurnProxy;
use super::{Knobs, SqlServer, claim, one_connection, options};

/// A store's own pool of one connection.
const ONE: Knobs = Knobs {
    max_connections: Some(1),
    acquire_timeout: None,
    purge_batch: None,
};

/// A proxy to the test server, and the options that reach the server
/// through it.
pub(crate) async fn proxy<S: SqlServer>() -> (TurnProxy, super::Options<S>) {
    let direct = options::<S>().await;
    let proxy = TurnProxy::start(S::upstream(&direct)).await;
    let via = S::via(direct, proxy.addr.port());
    (proxy, via)
}

/// A store at `place` on one connection through `proxy`, migrated, and
/// one at the same place that reaches the server directly.
pub(crate) async fn proxied<S: SqlServer>(test: &str) -> (TurnProxy, S::Store, S::Store) {
    let place = S::unique(test);
    let (proxy, via) = proxy::<S>().await;
    let proxied = S::connect_with(&place, ONE, via).await.unwrap();
    S::migrate(&proxied).await.unwrap();
    let direct = S::connect_with(&place, Knobs::default(), options::<S>().await);
    (proxy, proxied, direct.await.unwrap())
}

/// Each step is one round trip, and so is a replay: counted on the wire,
/// through a proxy, for the store's own connections and for sqlx pools.
pub(crate) async fn each_step_is_one_round_trip<S: SqlServer>() {
    let place = S::unique("turns");
    let (proxy, via) = proxy::<S>().await;
    let own = S::connect_with(&place, ONE, via.clone()).await.unwrap();
    S::migrate(&own).await.unwrap();
    let pooled = S::from_pool(&place, one_connection::<S>(via.clone(), false).await);
    // sqlx's default: test before acquire.
    let default_pooled = S::from_pool(&place, one_connection::<S>(via, true).await);
    let mut report = Vec::new();
    let stores = [
        ("own", &own as &dyn Store),
        ("pool", &pooled),
        ("default pool", &default_pooled),
    ];
    for (name, store) in stores {
        let turns = step_turns::<S>(&proxy, store).await;
        println!(
            "{name}: turns for claim, renew, save_step, complete, replay, release = {turns:?}"
        );
        report.push((name, turns));
    }
    // The store's own connections: one turn per step.
    assert_eq!(report[0].1, [1; 6], "{report:?}");
    // A sqlx pool without test_before_acquire: the statement plus the ping
    // on release.
    assert_eq!(report[1].1, [2; 6], "{report:?}");
    // sqlx's defaults: a ping before the statement too.
    assert_eq!(report[2].1, [3; 6], "{report:?}");
}

/// Turns for claim, renew, save_step, complete, replay and release on
/// `store`, after a warm-up.
async fn step_turns<S: SqlServer>(proxy: &TurnProxy, store: &dyn Store) -> [usize; 6] {
    let step = StepId::new(&"s");
    let lease = Duration::from_secs(30);
    // Warm up: the first use of each statement on a connection prepares
    // it.
    for _ in 0..2 {
        let key = RecordKey::new("warm", &Token::random().to_u128());
        let c = claim::<S>(lease);
        store.claim(&key, &c).await.unwrap();
        store.renew(&key, c.token, lease).await.unwrap();
        store
            .save_step(&key, c.token, step, b"v", lease)
            .await
            .unwrap();
        store.release(&key, c.token).await.unwrap();
        store.claim(&key, &c).await.unwrap();
        let retention = Retention::new(lease);
        store
            .complete(&key, c.token, b"r", retention)
            .await
            .unwrap();
        store.claim(&key, &c).await.unwrap();
    }
    proxy.take().await;
    let key = RecordKey::new("turns", &Token::random().to_u128());
    let c = claim::<S>(lease);
    store.claim(&key, &c).await.unwrap();
    let claim_turns = proxy.take().await;
    store.renew(&key, c.token, lease).await.unwrap();
    let renew_turns = proxy.take().await;
    store
        .save_step(&key, c.token, step, b"v", lease)
        .await
        .unwrap();
    let step_turns = proxy.take().await;
    let retention = Retention::new(lease);
    store
        .complete(&key, c.token, b"r", retention)
        .await
        .unwrap();
    let complete_turns = proxy.take().await;
    let again = store.claim(&key, &claim::<S>(lease)).await.unwrap();
    assert!(matches!(again, ClaimOutcome::Completed { .. }), "{again:?}");
    let replay_turns = proxy.take().await;
    let other = RecordKey::new("turns", &Token::random().to_u128());
    store.claim(&other, &c).await.unwrap();
    proxy.take().await;
    store.release(&other, c.token).await.unwrap();
    let release_turns = proxy.take().await;
    [
        claim_turns,
        renew_turns,
        step_turns,
        complete_turns,
        replay_turns,
        release_turns,
    ]
}
