//! A SQL store's [`Transactional`], written once: a transaction begun for
//! one request, whose record completes in it while the claim, renewals and
//! releases go through the store's own connections (committed at once, so
//! duplicates see the claim without waiting on a row lock).

use std::sync::Arc;
use std::time::Duration;

use idem_core::key::RecordKey;
use idem_core::store::{Claim, ClaimOutcome, Fence, Retention, Token, async_trait};
use idem_core::transaction::{Begun, Open};
use idem_core::{Store, StoreError};
use tokio::sync::{MappedMutexGuard, Mutex, MutexGuard};

use super::dialect::{Completion, Dialect, Query};
use super::send::Source;
use super::store::Core;
use crate::answer::{Affected, Answer};

/// The transaction's connection: from the caller's pool (`from_pool`),
/// or one of the store's own (`connect`), on which idem sent `BEGIN`.
enum Held<S: Dialect> {
    Pooled(sqlx::Transaction<'static, S::Db>),
    Own(S::Conn),
}

impl<S: Dialect> Held<S> {
    fn conn(&mut self) -> &mut S::Conn {
        match self {
            Held::Pooled(tx) => tx,
            Held::Own(conn) => conn,
        }
    }
}

/// The transaction, shared by the handler and the call; `None` once ended.
type Shared<S> = Arc<Mutex<Option<Held<S>>>>;

/// Begins a transaction for one request on `core`'s connections.
pub(crate) async fn begin<S: Dialect>(core: &Arc<Core<S>>) -> Result<Begun<S::Conn>, StoreError>
where
    Affected: for<'q> Answer<S::Conn, Query<'q, S>>,
{
    let held = match &core.conns {
        Source::Pool(pool) => Held::Pooled(
            S::begin_pooled(pool)
                .await
                .map_err(|e| core.sql.store_error(e))?,
        ),
        Source::Own(conns) => Held::Own(begun_own(core, conns).await?),
    };
    let tx: Shared<S> = Arc::new(Mutex::new(Some(held)));
    let store = RequestTxStore {
        core: Arc::clone(core),
        tx: Arc::clone(&tx),
    };
    let open = OpenTx {
        core: Arc::clone(core),
        tx,
    };
    Ok(Begun::new(Arc::new(store), Arc::new(open)))
}

/// One of the store's own connections out of its list, `BEGIN` sent; an
/// idle one found dead is replaced once by a new one.
async fn begun_own<S: Dialect>(
    core: &Core<S>,
    conns: &crate::conns::Conns<S::Conn>,
) -> Result<S::Conn, StoreError> {
    let mut conn = conns.take().await?;
    match S::send_raw(&mut conn, S::BEGIN_FOR_HANDLER).await {
        Ok(_) => Ok(conn),
        Err(err) if S::lost_connection(&err) => {
            conns.drop_idle();
            let mut conn = conns.connect().await?;
            S::send_raw(&mut conn, S::BEGIN_FOR_HANDLER)
                .await
                .map_err(|err| core.sql.store_error(err))?;
            Ok(conn)
        }
        Err(err) => Err(core.sql.store_error(err)),
    }
}

/// The transaction as the handler and the layer see it.
struct OpenTx<S: Dialect> {
    core: Arc<Core<S>>,
    tx: Shared<S>,
}

impl<S: Dialect> OpenTx<S> {
    async fn end(&self, commit: bool) -> Result<(), StoreError> {
        let Some(held) = self.tx.lock().await.take() else {
            return Ok(());
        };
        let err = |err| self.core.sql.store_error(err);
        match (held, commit) {
            (Held::Pooled(tx), true) => tx.commit().await.map_err(err),
            (Held::Pooled(tx), false) => tx.rollback().await.map_err(err),
            (Held::Own(mut conn), commit) => {
                let end = match commit {
                    true => S::COMMIT_FOR_HANDLER,
                    false => S::ROLLBACK_FOR_HANDLER,
                };
                S::send_raw(&mut conn, end).await.map_err(err)?;
                // Ended on a live connection: in a known state again.
                if let Source::Own(conns) = &self.core.conns {
                    conns.put_back(conn);
                }
                Ok(())
            }
        }
    }
}

#[async_trait]
impl<S: Dialect> Open<S::Conn> for OpenTx<S> {
    async fn conn(&self) -> Option<MappedMutexGuard<'_, S::Conn>> {
        MutexGuard::try_map(self.tx.lock().await, |held| held.as_mut().map(Held::conn)).ok()
    }

    async fn commit(&self) -> Result<(), StoreError> {
        self.end(true).await
    }

    async fn rollback(&self) -> Result<(), StoreError> {
        self.end(false).await
    }
}

/// The store a request's call runs on: every step on the store's own
/// connections but the completion, which runs in the transaction.
struct RequestTxStore<S: Dialect> {
    core: Arc<Core<S>>,
    tx: Shared<S>,
}

#[async_trait]
impl<S: Dialect> Store for RequestTxStore<S>
where
    Affected: for<'q> Answer<S::Conn, Query<'q, S>>,
{
    async fn claim(&self, key: &RecordKey, claim: &Claim) -> Result<ClaimOutcome, StoreError> {
        self.core.claim(key, claim).await
    }

    /// Fenced by the token and the lease, as on the store's connections;
    /// the row stays locked by the transaction until it ends.
    async fn complete(
        &self,
        key: &RecordKey,
        token: Token,
        record: &[u8],
        kept: Retention,
    ) -> Result<Fence, StoreError> {
        let sql = &self.core.sql;
        let token = token.to_bytes();
        let changed = {
            let mut tx = self.tx.lock().await;
            let Some(held) = tx.as_mut() else {
                return Err(StoreError::misconfigured(
                    S::NAMES.0,
                    "the request's transaction ended before its record completed",
                ));
            };
            let query = sql.complete_query(Completion::Held, key.as_bytes(), &token, record, kept);
            Affected::read(query, held.conn())
                .await
                .map_err(|err| sql.store_error(err))?
        };
        self.core.fence(changed, key).await
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
        self.core.release(key, token).await
    }

    async fn renew(
        &self,
        key: &RecordKey,
        token: Token,
        lease: Duration,
    ) -> Result<Fence, StoreError> {
        self.core.renew(key, token, lease).await
    }

    async fn forget(&self, key: &RecordKey) -> Result<(), StoreError> {
        self.core.forget(key).await
    }
}
