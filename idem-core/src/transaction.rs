//! A database transaction begun for one request, in which the handler
//! writes and its record completes: the HTTP layer's transactional mode
//! (`idem::http::IdempotencyLayer::transactional`). `PostgresStore` and
//! `MySqlStore` implement [`Transactional`].
//!
//! The claim is not in the transaction: it is committed at once, so a
//! duplicate arriving while the handler runs sees it (409, or a wait)
//! instead of blocking on a row lock. The completion is, fenced by the
//! claim's token: the handler's writes and the stored response commit
//! together, or neither does and the claim ends by release or lease.

use std::sync::Arc;

use tokio::sync::MappedMutexGuard;

use crate::store::async_trait;
use crate::{Store, StoreError};

/// A store whose records can complete in a transaction begun for one
/// request.
///
/// ```no_run
/// # #[tokio::main] async fn main() -> Result<(), idem::StoreError> {
/// use idem::transaction::Transactional;
///
/// let store = idem::PostgresStore::connect("postgres://app@localhost/app").await?;
/// let begun = store.begin().await?;
/// // Claims go to `begun.store()`; the handler writes on `begun.open().conn()`.
/// begun.open().rollback().await?;
/// # Ok(()) }
/// ```
#[async_trait]
pub trait Transactional: Send + Sync + 'static {
    /// The connection the handler writes through (`sqlx::PgConnection`,
    /// `sqlx::MySqlConnection`).
    type Conn: Send + 'static;

    /// Begins a transaction on one of the store's connections.
    async fn begin(&self) -> Result<Begun<Self::Conn>, StoreError>;
}

/// A transaction begun by [`Transactional::begin`], and the store a call
/// runs on to complete its record in it.
///
/// ```no_run
/// # async fn f<C>(begun: idem::transaction::Begun<C>) -> Result<(), Box<dyn std::error::Error>> {
/// let idem = idem::Idempotency::new(idem::MemoryStore::new());
/// let order: Result<u64, idem::Error> = idem
///     .call("orders", "order-1")
///     .on(&**begun.store())
///     .run(|| async { Ok(7) })
///     .await;
/// begun.open().commit().await?;
/// # Ok(()) }
/// ```
pub struct Begun<C> {
    store: Arc<dyn Store>,
    open: Arc<dyn Open<C>>,
}

impl<C> Begun<C> {
    /// `store`: claims, renewals and releases on the store's own
    /// connections, committed at once; the completion in `open`.
    pub fn new(store: Arc<dyn Store>, open: Arc<dyn Open<C>>) -> Self {
        Begun { store, open }
    }

    /// The store a call runs on ([`Call::on`](crate::Call::on)).
    pub fn store(&self) -> &Arc<dyn Store> {
        &self.store
    }

    /// The transaction.
    pub fn open(&self) -> &Arc<dyn Open<C>> {
        &self.open
    }
}

impl<C> std::fmt::Debug for Begun<C> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Begun").finish_non_exhaustive()
    }
}

/// An open transaction, shared by the handler (its writes) and the call
/// (the completion). Ends once, by [`commit`](Open::commit) or
/// [`rollback`](Open::rollback); dropped open, it rolls back.
///
/// ```no_run
/// # async fn f<C>(open: &dyn idem::transaction::Open<C>) -> Result<(), Box<dyn std::error::Error>> {
/// // The handler writes on `open.conn()` (with sqlx: `.execute(&mut *conn)`).
/// let conn = open.conn().await;
/// assert!(conn.is_some(), "open until it ends");
/// drop(conn);
/// open.commit().await?;
/// assert!(open.conn().await.is_none());
/// # Ok(()) }
/// ```
#[async_trait]
pub trait Open<C>: Send + Sync {
    /// The transaction's connection, held until the guard drops; `None`
    /// once the transaction has ended.
    async fn conn(&self) -> Option<MappedMutexGuard<'_, C>>;

    /// Commits. A transaction already ended is `Ok`.
    async fn commit(&self) -> Result<(), StoreError>;

    /// Rolls back. A transaction already ended is `Ok`.
    async fn rollback(&self) -> Result<(), StoreError>;
}
