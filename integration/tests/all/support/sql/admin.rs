//! Migrations, names, purges and admin views, the same on every SQL server.

use std::time::{Duration, Instant};

use futures::future::join_all;
use idem::admin::{Admin, RecordState};
use idem::key::RecordKey;
use idem::store::{ClaimOutcome, Fence, Retention, StepId};
use idem::{Error, Idempotency, Store, StoreError, StoreErrorKind};

use super::{Knobs, SqlServer, claim, migrations, options, store};

/// Four replicas made by `replica` migrate at once, then one again: one
/// version is recorded, the table is `table`, and a call works. Returns
/// the replicas, for a server's own checks.
pub(crate) async fn migrate_twice_and_concurrently_is_harmless<S: SqlServer>(
    replica: impl AsyncFn() -> Result<S::Store, StoreError>,
    table: &str,
) -> Vec<S::Store> {
    S::drop_stale().await;
    let stores: Vec<S::Store> = join_all((0..4).map(|_| replica()))
        .await
        .into_iter()
        .map(Result::unwrap)
        .collect();
    for done in join_all(stores.iter().map(S::migrate)).await {
        done.unwrap();
    }
    S::migrate(&stores[0]).await.unwrap();
    assert_eq!(
        S::versions(&migrations(table)).await,
        (1..=S::MIGRATIONS).collect::<Vec<_>>()
    );
    assert_eq!(S::table(&stores[0]), table);
    let idem = Idempotency::new(stores[1].clone());
    let out: Result<u8, Error> = idem.call("m", "k").run(|| async { Ok(1) }).await;
    assert_eq!(out.unwrap(), 1);
    assert_eq!(S::count(table).await, 1);
    stores
}

/// A table at a schema `version` this release does not know (a later
/// release's, or a build's before 0.1) is refused, and left as it is.
pub(crate) async fn migrate_refuses_an_unknown_schema_version<S: SqlServer>(version: i32) {
    let store = store::<S>("unknown_version").await;
    let versions = migrations(S::table(&store));
    S::record_version(&versions, version).await;
    let err = S::migrate(&store).await.unwrap_err().to_string();
    assert!(
        err.contains(&format!("schema version {version}")) && err.contains("before 0.1"),
        "{err}"
    );
    let mut known: Vec<i32> = (1..=S::MIGRATIONS).collect();
    known.push(version);
    assert_eq!(S::versions(&versions).await, known);
}

/// The same scope and key in two stores' tables are two records.
pub(crate) async fn two_tables_are_two_records<S: SqlServer>(a: &S::Store, b: &S::Store) {
    S::migrate(a).await.unwrap();
    S::migrate(b).await.unwrap();
    let one: Result<u8, Error> = Idempotency::new(a.clone())
        .call("s", "k")
        .run(|| async { Ok(1) })
        .await;
    let two: Result<u8, Error> = Idempotency::new(b.clone())
        .call("s", "k")
        .run(|| async { Ok(2) })
        .await;
    assert_eq!((one.unwrap(), two.unwrap()), (1, 2));
    assert_eq!(S::count(S::table(a)).await, 1);
    assert_eq!(S::count(S::table(b)).await, 1);
}

/// Names are quoted into SQL: only plain identifiers pass, and the others
/// are a setup to fix.
pub(crate) async fn bad_table_names_are_refused<S: SqlServer>(bad: &[&str]) {
    for bad in bad {
        let Err(err) = S::connect_table(bad).await else {
            panic!("{bad:?} was taken as a table name");
        };
        assert!(err.to_string().contains("invalid table name"), "{err}");
        assert_eq!(err.kind(), StoreErrorKind::Misconfigured, "{err}");
    }
}

pub(crate) async fn purge_expired_deletes_only_expired_rows_in_batches<S: SqlServer>() {
    let knobs = Knobs {
        purge_batch: Some(7),
        ..Knobs::default()
    };
    let store = S::connect_with(&S::unique("purge"), knobs, options::<S>().await)
        .await
        .unwrap();
    S::migrate(&store).await.unwrap();
    // Long enough that no row expires before the first purge, even on a
    // loaded machine.
    let short = Duration::from_secs(2);
    let started = Instant::now();
    // 30 completed records and 20 claims that expire soon, 5 of each that
    // do not.
    for i in 0..60u32 {
        let key = RecordKey::new("purge", &i);
        let life = if i % 6 == 0 {
            Duration::from_secs(60)
        } else {
            short
        };
        let c = claim::<S>(life);
        let won = store.claim(&key, &c).await.unwrap();
        assert!(matches!(won, ClaimOutcome::Won { .. }), "{won:?}");
        let fence = if i % 2 == 0 {
            store.complete(&key, c.token, b"r", Retention::new(life))
        } else {
            // A recovery point of the claim, expiring with it.
            store.save_step(&key, c.token, StepId::new(&"s"), b"v", life)
        };
        assert_eq!(fence.await.unwrap(), Fence::Held);
    }
    assert_eq!(S::purge_expired(&store).await, 0);
    let took = started.elapsed();
    assert!(took < short, "too slow to test: {took:?}");
    // Every short row expires within `short` of its own write, which
    // ended by now.
    let written = Instant::now();
    tokio::time::sleep_until((written + short + Duration::from_millis(100)).into()).await;
    // The 20 short records and the 30 steps of the (short) claims; the 30
    // lapsed claims stay a day (`LAPSED_CLAIM_KEPT`), the evidence that
    // the next call is a takeover (and reconciles).
    assert_eq!(S::purge_expired(&store).await, 20 + 30);
    assert_eq!(S::count(S::table(&store)).await, 10 + 30);
    assert_eq!(S::purge_expired(&store).await, 0);
    let (lapsed, retry) = (RecordKey::new("purge", &1u32), claim::<S>(short));
    assert!(
        matches!(
            store.claim(&lapsed, &retry).await,
            Ok(ClaimOutcome::Won {
                took_over: true,
                ..
            })
        ),
        "a purge erased a lapsed claim"
    );
}

pub(crate) async fn a_store_used_before_migrate_says_to_migrate<S: SqlServer>() {
    let store = S::connect_with(&S::unique("nomig"), Knobs::default(), options::<S>().await)
        .await
        .expect("connect");
    let idem = Idempotency::new(store);
    let out: Result<u8, Error> = idem.call("s", "k").run(|| async { Ok(1) }).await;
    let Err(Error::Store(err)) = out else {
        panic!("expected a store error, got {out:?}");
    };
    let message = err.to_string();
    assert!(
        message.contains(&format!("{}::migrate()", S::NAME)),
        "{message}"
    );
    // Not a fault to retry: a setup to fix.
    assert_eq!(err.kind(), StoreErrorKind::Misconfigured, "{err}");
}

/// A record past its TTL whose tombstone stands lists and counts as a
/// tombstone; a purge drops its value (it still answers `Expired`).
pub(crate) async fn admin_lists_counts_and_compacts_tombstones<S: SqlServer>() {
    let store = store::<S>("tombstone_admin").await;
    let idem = Idempotency::new(store.clone());
    let pay = || {
        idem.call("tomb", "o-1")
            .ttl(Duration::from_millis(300))
            .tombstone(Duration::from_secs(60))
            .run(|| async { Ok::<_, Error>("charged".repeat(20)) })
    };
    pay().await.unwrap();
    tokio::time::sleep(Duration::from_millis(800)).await;
    let key = RecordKey::new("tomb", "o-1");
    let info = store.inspect(&key).await.unwrap();
    let info = info.expect("the tombstone's row");
    assert_eq!(info.state, RecordState::Tombstone);
    let left = info.expires_in;
    assert!(
        left.is_some_and(|left| left > Duration::from_secs(30)),
        "{left:?}"
    );
    assert!(info.size > 0, "a value before the purge");
    assert_eq!(store.stats().await.unwrap().tombstones, 1);
    assert!(store.purge().await.unwrap().tombstones >= 1);
    let info = store.inspect(&key).await.unwrap();
    let info = info.expect("the tombstone's row");
    assert_eq!((info.state, info.size), (RecordState::Tombstone, 0));
    assert!(matches!(pay().await, Err(Error::Expired { .. })));
}
