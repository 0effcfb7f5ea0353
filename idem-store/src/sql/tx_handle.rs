//! A SQL store's `TxHandle`, written once: an `Idempotency` handle whose
//! steps run on a transaction it shares with the caller's body. Each store
//! keeps its public `TxHandle` (and its docs) as a newtype over
//! [`SharedTx`].

use std::sync::Arc;
use std::time::Duration;

use idem_core::key::RecordKey;
use idem_core::store::{Claim, ClaimOutcome, Fence, Retention, Token, async_trait};
use idem_core::{Idempotency, Store, StoreError};
use tokio::sync::{MappedMutexGuard, Mutex, MutexGuard};

use super::dialect::{Dialect, Query};
use super::store::Core;
use super::tx::TxStore;
use crate::answer::{Affected, Answer};

/// The transaction, shared by the handle's steps and the caller's body;
/// `None` once committed or rolled back.
type Shared<S> = Arc<Mutex<Option<sqlx::Transaction<'static, <S as Dialect>::Db>>>>;

/// What a store's `TxHandle` holds: the handle and its transaction.
pub(crate) struct SharedTx<S: Dialect> {
    idem: Idempotency,
    tx: Shared<S>,
}

impl<S: Dialect> SharedTx<S>
where
    Affected: for<'q> Answer<S::Conn, Query<'q, S>>,
{
    /// A handle (default settings) whose steps run on `tx`, the records in
    /// `core`'s table.
    pub(crate) fn new(core: &Arc<Core<S>>, tx: sqlx::Transaction<'static, S::Db>) -> Self {
        let tx: Shared<S> = Arc::new(Mutex::new(Some(tx)));
        let store = OwnedTxStore {
            core: Arc::clone(core),
            tx: Arc::clone(&tx),
        };
        SharedTx {
            idem: Idempotency::new(store),
            tx,
        }
    }
}

impl<S: Dialect> SharedTx<S> {
    pub(crate) fn idem(&self) -> &Idempotency {
        &self.idem
    }

    /// The transaction's connection, held until the guard drops.
    pub(crate) async fn conn(&self) -> MappedMutexGuard<'_, S::Conn> {
        MutexGuard::map(self.tx.lock().await, |tx| {
            // Only `commit` and `rollback` end the transaction, and they
            // take the handle.
            &mut **tx.as_mut().expect("a live TxHandle holds its transaction")
        })
    }

    pub(crate) async fn commit(self) -> Result<(), sqlx::Error> {
        match self.tx.lock().await.take() {
            Some(tx) => tx.commit().await,
            None => Ok(()),
        }
    }

    pub(crate) async fn rollback(self) -> Result<(), sqlx::Error> {
        match self.tx.lock().await.take() {
            Some(tx) => tx.rollback().await,
            None => Ok(()),
        }
    }
}

/// The store of a `TxHandle`: each step borrows the transaction's
/// connection and runs as the store's `in_transaction` steps do.
struct OwnedTxStore<S: Dialect> {
    core: Arc<Core<S>>,
    tx: Shared<S>,
}

impl<S: Dialect> OwnedTxStore<S>
where
    Affected: for<'q> Answer<S::Conn, Query<'q, S>>,
{
    async fn on_tx<R>(
        &self,
        step: impl AsyncFnOnce(&TxStore<'_, S>) -> Result<R, StoreError>,
    ) -> Result<R, StoreError> {
        let mut tx = self.tx.lock().await;
        let Some(tx) = tx.as_mut() else {
            return Err(StoreError::misconfigured(
                S::NAMES.0,
                "the TxHandle's transaction has ended (committed or rolled back)",
            ));
        };
        step(&TxStore::new(&self.core.sql, &mut **tx)).await
    }
}

#[async_trait]
impl<S: Dialect> Store for OwnedTxStore<S>
where
    Affected: for<'q> Answer<S::Conn, Query<'q, S>>,
{
    async fn claim(&self, key: &RecordKey, claim: &Claim) -> Result<ClaimOutcome, StoreError> {
        self.on_tx(async |store| store.claim(key, claim).await)
            .await
    }

    async fn complete(
        &self,
        key: &RecordKey,
        token: Token,
        record: &[u8],
        kept: Retention,
    ) -> Result<Fence, StoreError> {
        self.on_tx(async |store| store.complete(key, token, record, kept).await)
            .await
    }

    /// Not sent again: the failure ended the transaction the completion
    /// was in.
    async fn complete_again(
        &self,
        _: &RecordKey,
        _: Token,
        _: &[u8],
        _: Retention,
    ) -> Result<Fence, StoreError> {
        Err(super::tx::not_sent_again(S::NAMES.0))
    }

    async fn release(&self, key: &RecordKey, token: Token) -> Result<Fence, StoreError> {
        self.on_tx(async |store| store.release(key, token).await)
            .await
    }

    /// Nothing to do, as in `in_transaction`: the claim row is locked by
    /// the transaction. (Not locking here also keeps a renewal from
    /// waiting on a body that holds the connection.)
    async fn renew(&self, _: &RecordKey, _: Token, _: Duration) -> Result<Fence, StoreError> {
        Ok(Fence::Held)
    }

    /// Inside the transaction: the record is gone when it commits.
    async fn forget(&self, key: &RecordKey) -> Result<(), StoreError> {
        self.on_tx(async |store| store.forget(key).await).await
    }
}

/// `impl TxHandle { conn, commit, rollback }`, `Deref<Target =
/// Idempotency>` and `Debug` for a SQL store's public `TxHandle`, a
/// newtype over [`SharedTx`], where `Idempotency` is in scope; `$conn` is the store's sqlx connection,
/// `$path` the handle's public path in the examples.
macro_rules! tx_handle_methods {
    ($conn:ty, $path:literal) => {
        impl TxHandle {
            /// The transaction's connection, for the body's own writes
            /// (`.execute(&mut *tx.conn().await)`). Held until the guard drops.
            ///
            /// ```no_run
            #[doc = concat!("# async fn f(tx: ", $path, ") -> Result<(), sqlx::Error> {")]
            /// sqlx::query("INSERT INTO audit (event) VALUES ('e')")
            ///     .execute(&mut *tx.conn().await)
            ///     .await?;
            /// # Ok(()) }
            /// ```
            pub async fn conn(&self) -> tokio::sync::MappedMutexGuard<'_, $conn> {
                self.0.conn().await
            }

            /// Commits the effects and the records together.
            ///
            /// ```no_run
            #[doc = concat!("# async fn f(tx: ", $path, ") -> Result<(), sqlx::Error> {")]
            /// tx.commit().await?;
            /// # Ok(()) }
            /// ```
            pub async fn commit(self) -> Result<(), sqlx::Error> {
                self.0.commit().await
            }

            /// Rolls back the effects and the claims: a retry runs the body
            /// again at once.
            ///
            /// ```no_run
            #[doc = concat!("# async fn f(tx: ", $path, ") -> Result<(), sqlx::Error> {")]
            /// tx.rollback().await?;
            /// # Ok(()) }
            /// ```
            pub async fn rollback(self) -> Result<(), sqlx::Error> {
                self.0.rollback().await
            }
        }

        impl std::ops::Deref for TxHandle {
            type Target = Idempotency;

            fn deref(&self) -> &Idempotency {
                self.0.idem()
            }
        }

        impl std::fmt::Debug for TxHandle {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.debug_struct("TxHandle").finish_non_exhaustive()
            }
        }
    };
}

pub(crate) use tx_handle_methods;
