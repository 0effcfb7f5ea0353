//! What a SQL store's database does its own way, behind one trait: the
//! statements of its table, how they bind a step's values, how its answers
//! read, and which failures mean what. The generic code in `store.rs` and
//! `tx.rs` runs the steps through it.

use std::time::Duration;

use idem_contract::StoreError;
use idem_contract::store::{Claim, ClaimOutcome, Retention};
use sqlx::{Connection, Database};

use crate::answer::{Answer, Sent};

/// A statement of dialect `D` with its parameters bound.
pub(crate) type Query<'q, D> =
    sqlx::query::Query<'q, <D as Dialect>::Db, <<D as Dialect>::Db as Database>::Arguments<'q>>;

/// The statements of one records table, in one database's SQL (each
/// store's `Sql`). Implemented only by the stores of this crate.
pub(crate) trait Dialect: Send + Sync + Sized + 'static {
    /// The sqlx database.
    type Db: Database<Connection = Self::Conn>;
    /// Its connection.
    type Conn: Connection<Database = Self::Db>;
    /// What the claim statement answers (a row, or a procedure's rows).
    type Claimed: for<'q> Answer<Self::Conn, Query<'q, Self>>;
    /// What the statement asking whether a key is live answers.
    type Live: for<'q> Answer<Self::Conn, Query<'q, Self>>;
    /// What the read of a completed record answers.
    type Found: for<'q> Answer<Self::Conn, Query<'q, Self>>;

    /// The backend's name in a `StoreError`, and the server's in messages.
    const NAMES: (&'static str, &'static str);

    /// What begins a handler's transaction on one of the store's own
    /// connections: free of the store's own statement limit, since the
    /// handler's statements are the caller's to bound.
    const BEGIN_FOR_HANDLER: &'static str = "BEGIN";
    /// What ends it, on the store's own connections: the store's limits
    /// in force again before the connection goes back.
    const COMMIT_FOR_HANDLER: &'static str = "COMMIT";
    const ROLLBACK_FOR_HANDLER: &'static str = "ROLLBACK";

    /// Whether `err` says the connection itself is gone (rather than the
    /// statement failing), so that sending the step again on a new
    /// connection may succeed.
    fn lost_connection(err: &sqlx::Error) -> bool;

    /// Whether `err` says the server rolled the statement back (a
    /// deadlock, a serialization failure): it took no effect, and may be
    /// sent again.
    fn rolled_back(err: &sqlx::Error) -> bool;

    /// A failed statement of a step as a store error.
    fn store_error(&self, err: sqlx::Error) -> StoreError;

    /// A transaction on a connection of the caller's pool.
    fn begin_pooled(pool: &sqlx::Pool<Self::Db>) -> Sent<'_, sqlx::Transaction<'static, Self::Db>>;

    /// `BEGIN`, `COMMIT` or `ROLLBACK`, unprepared (as sqlx sends its own).
    fn send_raw<'c>(conn: &'c mut Self::Conn, text: &'static str) -> Sent<'c, ()>;

    /// The claim; `own_tx` false inside the caller's transaction.
    fn claim_query<'q>(
        &'q self,
        key: &'q [u8],
        claim: &'q ClaimBytes,
        own_tx: bool,
    ) -> Query<'q, Self>;

    /// The read of `key`'s completed, unexpired record, as the claim
    /// answers one (outcome, fingerprint, record, time left); no row
    /// where there is none.
    fn completed_query<'q>(&'q self, key: &'q [u8]) -> Query<'q, Self>;

    /// The completion `how` asks for.
    fn complete_query<'q>(
        &'q self,
        how: Completion,
        key: &'q [u8],
        token: &'q [u8],
        record: &'q [u8],
        kept: Retention,
    ) -> Query<'q, Self>;

    /// The release, fenced by the lease too unless `locked` (in the
    /// caller's transaction, which holds the row's lock).
    fn release_query<'q>(&'q self, locked: bool, key: &'q [u8], token: &'q [u8])
    -> Query<'q, Self>;

    /// The renewal of a held claim's lease.
    fn renew_query<'q>(
        &'q self,
        key: &'q [u8],
        token: &'q [u8],
        lease: Duration,
    ) -> Query<'q, Self>;

    /// The save of a finished step under a held claim.
    fn save_step_query<'q>(&'q self, step: StepSave<'q>) -> Query<'q, Self>;

    /// Whether anyone holds or completed `key`.
    fn live_query<'q>(&'q self, key: &'q [u8]) -> Query<'q, Self>;

    /// Deletes the record under `key` and its steps.
    fn forget_query<'q>(&'q self, key: &'q [u8]) -> Query<'q, Self>;

    /// One batch of at most `batch` rows of `purge`.
    fn purge_query(&self, purge: Purge, batch: i64) -> Query<'_, Self>;

    /// Reads the claim's answer.
    fn claim_outcome(answer: &Self::Claimed) -> Result<ClaimOutcome, StoreError>;

    /// Reads the completed record's read: `None` where it found none.
    fn completed_outcome(answer: &Self::Found) -> Result<Option<ClaimOutcome>, StoreError>;

    /// Reads the live statement's answer.
    fn is_live(&self, answer: &Self::Live) -> Result<bool, StoreError>;
}

/// Which completion statement to send.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Completion {
    /// Fenced by our token and the lease.
    Held,
    /// Sent a second time after a lost connection: also accepts the row
    /// the first one may have written.
    Again,
    /// In the caller's transaction, which holds the row's lock.
    Locked,
}

/// What `purge_expired` deletes, one statement each, in this order.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Purge {
    /// Expired records and claims whose tombstone, if any, has passed.
    Records,
    /// The values of records past their TTL whose tombstone stands.
    Tombstones,
    /// Expired steps.
    Steps,
}

/// A finished step's save, as its statement binds it.
pub(crate) struct StepSave<'q> {
    pub key: &'q [u8],
    pub token: &'q [u8],
    pub step: &'q [u8],
    pub value: &'q [u8],
    pub ttl: Duration,
}

/// A claim's parameters as the claim statement binds them.
pub(crate) struct ClaimBytes {
    pub token: [u8; 16],
    pub fingerprint: [u8; 32],
    pub lease_us: i64,
    pub site: &'static str,
    /// `Claim::rerun`: replace a completed record of another payload.
    pub rerun: bool,
}

impl From<&Claim> for ClaimBytes {
    fn from(claim: &Claim) -> Self {
        ClaimBytes {
            token: claim.token.to_bytes(),
            fingerprint: *claim.fingerprint.as_bytes(),
            lease_us: micros(claim.lease),
            site: claim.site,
            rerun: claim.rerun,
        }
    }
}

/// A duration as whole microseconds for the server, capped at 100 years
/// (MySQL's `DATETIME` ends in the year 9999).
pub(crate) fn micros(duration: Duration) -> i64 {
    const CAP: u128 = 100 * 365 * 24 * 3600 * 1_000_000;
    duration.as_micros().min(CAP) as i64
}
