//! Operating records: listing, inspecting, purging and counting them, for
//! the `idem` CLI and for operators' own tools. A store that keeps enough
//! per record (state, creation time, the call site's name) implements
//! [`Admin`]; forgetting one key is [`Store::forget`].

use std::time::Duration;

use bytes::Bytes;

use crate::fingerprint::Fingerprint;
use crate::key::RecordKey;
use crate::{Store, StoreError};

/// Where a record stands, by the store's clock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum RecordState {
    /// A claim whose body is running (or whose holder died and whose
    /// lease has not run out yet).
    InProgress,
    /// A stored result, replayed to duplicates.
    Completed,
    /// A completed record past its TTL (and tombstone, if any): ignored by
    /// every call, kept until purged.
    Expired,
    /// A claim whose lease ran out without a result: its holder died or
    /// stopped renewing. Not in progress: the next call takes it over
    /// (and asks [`reconcile`](https://docs.rs/idemkit/latest/idem/struct.Call.html#method.reconcile), if set). Every
    /// store calls this state so, whether it keeps the claim until purged
    /// (the SQL stores) or for a while after its lease (Redis, a day).
    Lapsed,
    /// A completed record past its TTL whose tombstone stands
    /// ([`Call::tombstone`](https://docs.rs/idemkit/latest/idem/struct.Call.html#method.tombstone)): late duplicates get
    /// `Error::Expired` until it ends (`expires_in`); purging drops its
    /// value and keeps the rest until then.
    Tombstone,
}

impl RecordState {
    /// The state of a row whose lease or TTL has `live` time left and
    /// which holds a claim (`in_progress`) or a result.
    ///
    /// ```
    /// use idem_contract::admin::RecordState;
    /// assert_eq!(RecordState::of(true, true), RecordState::InProgress);
    /// assert_eq!(RecordState::of(false, true), RecordState::Lapsed);
    /// assert_eq!(RecordState::of(false, false), RecordState::Expired);
    /// ```
    pub const fn of(live: bool, in_progress: bool) -> Self {
        match (live, in_progress) {
            (false, true) => RecordState::Lapsed,
            (false, false) => RecordState::Expired,
            (true, true) => RecordState::InProgress,
            (true, false) => RecordState::Completed,
        }
    }

    /// The state of a row as [`of`](Self::of) tells it, or a
    /// [`Tombstone`](Self::Tombstone) for a completed row past its TTL
    /// whose tombstone has time left (`tombstone_live`).
    ///
    /// ```
    /// use idem_contract::admin::RecordState;
    /// assert_eq!(RecordState::of_row(false, false, true), RecordState::Tombstone);
    /// assert_eq!(RecordState::of_row(false, false, false), RecordState::Expired);
    /// assert_eq!(RecordState::of_row(true, false, true), RecordState::Completed);
    /// ```
    pub const fn of_row(live: bool, in_progress: bool, tombstone_live: bool) -> Self {
        match Self::of(live, in_progress) {
            RecordState::Expired if tombstone_live => RecordState::Tombstone,
            state => state,
        }
    }

    /// `in_progress`, `completed`, `expired`, `lapsed` or `tombstone`.
    pub const fn as_str(self) -> &'static str {
        match self {
            RecordState::InProgress => "in_progress",
            RecordState::Completed => "completed",
            RecordState::Expired => "expired",
            RecordState::Lapsed => "lapsed",
            RecordState::Tombstone => "tombstone",
        }
    }
}

/// One record as a store keeps it: never the raw key, which is not stored.
/// Stores build it with [`RecordInfo::new`] and set what they know.
///
/// ```
/// use idem_contract::admin::{RecordInfo, RecordState};
/// use idem_contract::{fingerprint::Fingerprint, key::RecordKey};
/// let mut info = RecordInfo::new(
///     RecordKey::new("orders", "o-1"),
///     RecordState::Completed,
///     Fingerprint::of(&"payload").unwrap(),
/// );
/// info.size = 42;
/// assert_eq!(info.record, None);
/// ```
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct RecordInfo {
    /// The hashed key.
    pub key: RecordKey,
    /// The call site's static name ([`Claim::site`](crate::store::Claim::site));
    /// `None` where the store does not keep it (Redis keeps it only while
    /// the claim is in progress).
    pub site: Option<String>,
    /// In progress, completed, expired, lapsed or a tombstone.
    pub state: RecordState,
    /// Since the claim was won, by the store's clock (Redis: a completed
    /// record's, since it completed).
    pub age: Duration,
    /// Until the lease (in progress), TTL (completed) or tombstone runs
    /// out; `None` once expired or lapsed.
    pub expires_in: Option<Duration>,
    /// The payload fingerprint the record was claimed with.
    pub fingerprint: Fingerprint,
    /// The stored record's size in bytes (0 while in progress).
    pub size: usize,
    /// The stored record, when asked for ([`Admin::inspect`]); decode it
    /// with [`idem::admin::decode_record_json`](https://docs.rs/idemkit/latest/idem/admin/fn.decode_record_json.html).
    pub record: Option<Bytes>,
}

impl RecordInfo {
    /// A record under `key` in `state`, claimed with `fingerprint`; every
    /// other field empty (`None`, zero) until the store sets it.
    pub fn new(key: RecordKey, state: RecordState, fingerprint: Fingerprint) -> Self {
        Self {
            key,
            site: None,
            state,
            age: Duration::ZERO,
            expires_in: None,
            fingerprint,
            size: 0,
            record: None,
        }
    }
}

/// Which records [`Admin::list`] returns: all of them by default.
///
/// ```
/// use std::time::Duration;
/// use idem_contract::admin::ListFilter;
/// let stuck = ListFilter::default().in_progress().older_than(Duration::from_secs(600)).limit(50);
/// assert!(stuck.in_progress);
/// ```
#[derive(Debug, Clone, Default)]
#[non_exhaustive]
pub struct ListFilter {
    /// Only live in-progress claims.
    pub in_progress: bool,
    /// Only records claimed at least this long ago.
    pub older_than: Option<Duration>,
    /// At most this many, oldest first (`None`: all).
    pub limit: Option<usize>,
}

impl ListFilter {
    /// Only live in-progress claims.
    pub fn in_progress(mut self) -> Self {
        self.in_progress = true;
        self
    }

    /// Only records claimed at least `age` ago.
    pub fn older_than(mut self, age: Duration) -> Self {
        self.older_than = Some(age);
        self
    }

    /// At most `n` records, oldest first.
    pub fn limit(mut self, n: usize) -> Self {
        self.limit = Some(n);
        self
    }
}

/// Counts of a store's records by state. Stores start from
/// `Stats::default()` and set the counts they keep.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Stats {
    /// Live in-progress claims.
    pub in_progress: u64,
    /// Live completed records.
    pub completed: u64,
    /// Expired records not yet purged (tombstones not counted).
    pub expired: u64,
    /// Claims whose lease ran out without a result
    /// ([`RecordState::Lapsed`]), not counted as in progress.
    pub lapsed: u64,
    /// Completed records past their TTL whose tombstone stands.
    pub tombstones: u64,
    /// Bytes of stored records (completed and expired).
    pub bytes: u64,
}

/// What [`Admin::purge`] did: expired records (and claims) deleted, the
/// steps of expired calls deleted, and records past their TTL kept as
/// tombstones without their value, counted apart.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Purged {
    /// Expired records and lapsed claims deleted.
    pub records: u64,
    /// Saved steps of expired calls deleted.
    pub steps: u64,
    /// Records past their TTL whose value was dropped, the rest kept as a
    /// tombstone until its own end.
    pub tombstones: u64,
}

/// How a purge paces itself ([`Admin::purge_with`]): at most `batch` rows
/// per statement (each statement is one short transaction, found through
/// the `expires_at` index), and `pause` between two statements, so that
/// the claims beside it wait behind one small batch at most. The defaults
/// ([`DEFAULT_BATCH`](Self::DEFAULT_BATCH) rows,
/// [`DEFAULT_PAUSE`](Self::DEFAULT_PAUSE)) kept claims' p99 during a purge of
/// 10^6 expired rows within 2× of their p99 without one on every SQL store
/// (1.31× SQLite, 1.82× PostgreSQL, 1.60× MariaDB; BENCHMARKS.md). Smaller
/// batches hold claims up for less and make the purge longer: 250 rows
/// brought PostgreSQL to 1.61× and took 2.8 times as long.
///
/// ```
/// use std::time::Duration;
/// use idem_contract::admin::Purge;
/// let gentle = Purge::default().batch(500).pause(Duration::from_millis(50));
/// assert_eq!((gentle.batch, gentle.pause), (500, Duration::from_millis(50)));
/// assert_eq!(Purge::default().batch(0).batch, 1, "a batch holds one row at least");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct Purge {
    /// Rows one statement deletes at most (at least 1).
    pub batch: u32,
    /// How long to wait between two statements.
    pub pause: Duration,
}

impl Purge {
    /// Rows per statement unless set.
    pub const DEFAULT_BATCH: u32 = 1_000;
    /// The wait between statements unless set.
    pub const DEFAULT_PAUSE: Duration = Duration::from_millis(20);

    /// At most `rows` rows per statement (0 counts as 1).
    pub fn batch(mut self, rows: u32) -> Self {
        self.batch = rows.max(1);
        self
    }

    /// `pause` between two statements (zero: back to back).
    pub fn pause(mut self, pause: Duration) -> Self {
        self.pause = pause;
        self
    }
}

impl Default for Purge {
    fn default() -> Self {
        Purge {
            batch: Self::DEFAULT_BATCH,
            pause: Self::DEFAULT_PAUSE,
        }
    }
}

/// What an operator does to a store's records as a whole. Implemented by
/// `SqliteStore`, `PostgresStore`, `MySqlStore`, `RedisStore` and
/// `MemoryStore`.
///
/// ```
/// use idem_contract::StoreError;
/// use idem_contract::admin::{Admin, ListFilter};
///
/// /// Prints the claims held for ten minutes or more, on any store.
/// async fn stuck(store: &impl Admin) -> Result<(), StoreError> {
///     let stuck = ListFilter::default()
///         .in_progress()
///         .older_than(std::time::Duration::from_secs(600));
///     for record in store.list(&stuck).await? {
///         println!("{} {:?} {:?}", record.key.to_hex(), record.site, record.age);
///     }
///     Ok(())
/// }
/// ```
#[async_trait::async_trait]
pub trait Admin: Store {
    /// Records matching `filter`, oldest first.
    async fn list(&self, filter: &ListFilter) -> Result<Vec<RecordInfo>, StoreError>;

    /// The record under `key`, with its bytes, or `None`.
    async fn inspect(&self, key: &RecordKey) -> Result<Option<RecordInfo>, StoreError>;

    /// Deletes expired records and the steps of expired calls; returns
    /// how many of each. Paced as the store's builder set it, or as
    /// [`Purge::default`].
    async fn purge(&self) -> Result<Purged, StoreError>;

    /// Purges as [`purge`](Self::purge) does, in batches of at most
    /// `options.batch` rows with `options.pause` between them, so that
    /// claims are not kept waiting behind one long delete. A store that
    /// does not override it purges as `purge` does (Redis: keys expire by
    /// themselves, there is nothing to pace).
    async fn purge_with(&self, options: &Purge) -> Result<Purged, StoreError> {
        let _ = options;
        self.purge().await
    }

    /// Counts records by state.
    async fn stats(&self) -> Result<Stats, StoreError>;
}
