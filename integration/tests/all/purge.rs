//! Paced purges (issue 50): `Admin::purge_with` deletes in batches of the
//! size asked for with the pause asked for between them, deletes every
//! expired record and nothing live, on every SQL store; `spawn_purge` runs
//! it every period until stopped, on paused time with `MemoryStore` and
//! once on SQLite.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use idem::admin::{Admin, Purge, spawn_purge};
use idem::fingerprint::Fingerprint;
use idem::key::RecordKey;
use idem::store::{Claim, ClaimOutcome, Fence, Retention, Token};
use idem::{MemoryStore, MySqlStore, PostgresStore, SqliteStore, Store};

use crate::support::{mysql_server, pg_server};

const EXPIRED: u64 = 60;
const LIVE: u64 = 10;
const BATCH: u32 = 7;
const PAUSE: Duration = Duration::from_millis(150);
/// Long enough that no short record expires before the last is written,
/// even on a loaded machine.
const SHORT: Duration = Duration::from_secs(2);

/// Writes `EXPIRED` completed records living `short` and `LIVE` living
/// an hour; returns once the short ones have expired.
async fn fill(store: &impl Store, short: Duration) {
    for i in 0..EXPIRED + LIVE {
        let key = RecordKey::new("purge", &i);
        let life = if i < EXPIRED {
            short
        } else {
            Duration::from_secs(3600)
        };
        let claim = Claim::new(Token::random(), Fingerprint::NONE, life, "purge");
        let won = store.claim(&key, &claim).await.unwrap();
        assert!(matches!(won, ClaimOutcome::Won { .. }), "{won:?}");
        let done = store.complete(&key, claim.token, b"r", Retention::new(life));
        assert_eq!(done.await.unwrap(), Fence::Held);
    }
    tokio::time::sleep(short + Duration::from_millis(200)).await;
}

/// Records the store still holds, expired or not.
async fn held(store: &impl Admin) -> u64 {
    let stats = store.stats().await.unwrap();
    stats.completed + stats.expired + stats.tombstones
}

/// Purges `store` (filled by `fill`) in batches of `BATCH` with `PAUSE`
/// between them while sampling how many records it holds: every count
/// seen is the start less whole batches, several are seen between the
/// first and the last, all expired records go and every live one stays.
async fn paced(store: impl Admin + Clone + 'static) {
    fill(&store, SHORT).await;
    assert_eq!(held(&store).await, EXPIRED + LIVE);
    let options = Purge::default().batch(BATCH).pause(PAUSE);
    let purging = {
        let store = store.clone();
        tokio::spawn(async move { store.purge_with(&options).await })
    };
    let mut seen = BTreeSet::new();
    while !purging.is_finished() {
        seen.insert(held(&store).await);
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let purged = purging.await.unwrap().unwrap();
    assert_eq!(purged.records, EXPIRED);
    assert_eq!(held(&store).await, LIVE, "every live record stays");
    let between: Vec<u64> = seen
        .iter()
        .copied()
        .filter(|&n| n > LIVE && n < EXPIRED + LIVE)
        .collect();
    assert!(
        between
            .iter()
            .all(|n| (EXPIRED + LIVE - n).is_multiple_of(u64::from(BATCH))),
        "counts seen mid-purge are whole batches apart: {seen:?}"
    );
    // 8 full batches, each followed by a pause: most are seen.
    assert!(between.len() >= 4, "batches seen: {seen:?}");
    for i in EXPIRED..EXPIRED + LIVE {
        let info = store.inspect(&RecordKey::new("purge", &i)).await.unwrap();
        assert!(info.is_some(), "live record {i} kept");
    }
    assert_eq!(store.purge_with(&options).await.unwrap().records, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_purges_in_paced_batches() {
    let dir = std::env::temp_dir().join(format!("idem-purge-{:x}", Token::random().to_u128()));
    std::fs::create_dir_all(&dir).unwrap();
    paced(SqliteStore::open(dir.join("purge.db")).await.unwrap()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_purges_in_paced_batches() {
    let store = PostgresStore::builder()
        .schema(pg_server::unique_schema("purge_paced"))
        .connect(&pg_server::url().await)
        .await
        .unwrap();
    store.migrate().await.unwrap();
    paced(store).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mysql_purges_in_paced_batches() {
    let store = MySqlStore::builder()
        .table(mysql_server::unique_table("purge_paced"))
        .connect(&mysql_server::url().await)
        .await
        .unwrap();
    store.migrate().await.unwrap();
    paced(store).await;
}

/// On paused time: nothing is purged before the first period, each period
/// purges what expired since, and a dropped task purges no more.
#[tokio::test(start_paused = true)]
async fn spawn_purge_runs_every_period_until_dropped() {
    let store = Arc::new(MemoryStore::new());
    let period = Duration::from_secs(60);
    let task = spawn_purge(store.clone(), period, Purge::default()).unwrap();
    fill(&*store, Duration::from_secs(10)).await;
    assert_eq!((task.runs(), store.len() as u64), (0, EXPIRED + LIVE));
    tokio::time::sleep(period).await;
    assert_eq!(task.runs(), 1);
    assert_eq!(task.purged().records, EXPIRED);
    assert_eq!(store.len() as u64, LIVE, "the live records stay");
    tokio::time::sleep(period * 3).await;
    assert_eq!((task.runs(), task.failures()), (4, 0));
    drop(task);
    // A record written after the drop expires and stays: no sweep runs.
    let key = RecordKey::new("after", &0u8);
    let claim = Claim::new(Token::random(), Fingerprint::NONE, period, "purge");
    store.claim(&key, &claim).await.unwrap();
    let ttl = Retention::new(Duration::from_secs(1));
    assert_eq!(
        store.complete(&key, claim.token, b"r", ttl).await.unwrap(),
        Fence::Held
    );
    tokio::time::sleep(period * 3).await;
    assert_eq!(store.stats().await.unwrap().expired, 1);
    assert_eq!(store.len() as u64, LIVE + 1, "no purge ran after the drop");
}

/// `shutdown` ends the task; outside a runtime, or with a zero period,
/// it is a typed error rather than a panic.
#[tokio::test(start_paused = true)]
async fn spawn_purge_shuts_down_and_refuses_misuse() {
    let store = Arc::new(MemoryStore::new());
    let task = spawn_purge(store.clone(), Duration::from_secs(1), Purge::default()).unwrap();
    tokio::time::sleep(Duration::from_millis(2500)).await;
    assert_eq!(task.runs(), 2);
    task.shutdown().await;
    let zero = spawn_purge(store.clone(), Duration::ZERO, Purge::default()).unwrap_err();
    assert!(zero.to_string().contains("period"), "{zero}");
    let outside = std::thread::spawn(move || {
        spawn_purge(store, Duration::from_secs(1), Purge::default()).unwrap_err()
    });
    let err = outside.join().unwrap();
    assert!(err.to_string().contains("tokio runtime"), "{err}");
}

/// Once on a real store: a scheduled purge empties SQLite of its expired
/// records and keeps the live ones.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn spawn_purge_purges_sqlite() {
    let dir = std::env::temp_dir().join(format!("idem-purge-{:x}", Token::random().to_u128()));
    std::fs::create_dir_all(&dir).unwrap();
    let store = Arc::new(SqliteStore::open(dir.join("spawn.db")).await.unwrap());
    fill(&*store, Duration::from_secs(1)).await;
    let options = Purge::default().batch(16).pause(Duration::from_millis(5));
    let task = spawn_purge(store.clone(), Duration::from_millis(300), options).unwrap();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    while task.purged().records < EXPIRED && tokio::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(task.purged().records, EXPIRED);
    assert_eq!(held(&*store).await, LIVE);
    task.shutdown().await;
}
