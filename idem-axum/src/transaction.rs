//! The transactional mode for handlers (SPEC §7): a database transaction
//! per guarded request, given to the handler by the [`Transaction`]
//! extractor, in which the layer completes the request's record; it
//! commits after the handler returns and before the response is sent.

use std::future::Future;
use std::marker::PhantomData;
use std::pin::Pin;
use std::sync::Arc;

use axum::body::Body;
use axum::extract::FromRequestParts;
use axum::http::{Extensions, Request, request::Parts};
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use idem_core::problem::Problem;
use idem_core::transaction::{Open, Transactional};
use idem_core::{Error, Failed, Reported, Store, StoreError};
use tokio::sync::MappedMutexGuard;
use tower::Service;

use crate::IdempotencyLayer;
use crate::layer::Config;
use crate::request::Rest;

type BoxError = Box<dyn std::error::Error + Send + Sync>;
type Boxed<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// The handler's database transaction in the layer's transactional mode
/// ([`IdempotencyLayer::transactional`]): its writes and the request's
/// stored response commit together, after the handler returns and before
/// the response is sent. `C` is the store's connection:
/// `sqlx::PgConnection` for `PostgresStore`, `sqlx::MySqlConnection` for
/// `MySqlStore`. A handler never commits it; an error answer (a 5xx, or
/// a status the layer does not store) rolls it back.
///
/// ```no_run
/// use axum::{Json, http::StatusCode};
/// use idem::http::Transaction;
/// use serde_json::{Value, json};
///
/// async fn create_order(
///     tx: Transaction<sqlx::PgConnection>,
///     Json(order): Json<Value>,
/// ) -> Result<(StatusCode, Json<Value>), idem::Error> {
///     let id: i64 = sqlx::query_scalar("INSERT INTO orders (body) VALUES ($1) RETURNING id")
///         .bind(order.to_string())
///         .fetch_one(&mut *tx.conn().await?)
///         .await
///         .map_err(|err| idem::StoreError::new("orders", err))?;
///     Ok((StatusCode::CREATED, Json(json!({ "id": id }))))
/// }
/// ```
pub struct Transaction<C> {
    open: Arc<dyn Open<C>>,
}

impl<C> Clone for Transaction<C> {
    fn clone(&self) -> Self {
        Transaction {
            open: Arc::clone(&self.open),
        }
    }
}

impl<C> std::fmt::Debug for Transaction<C> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Transaction").finish_non_exhaustive()
    }
}

impl<C: Send + 'static> Transaction<C> {
    /// The transaction's connection, held until the guard drops (drop it
    /// before the handler returns). `Error::Store` once the transaction
    /// has ended, which only a task outliving its handler sees.
    ///
    /// ```no_run
    /// # async fn f(tx: idem::http::Transaction<sqlx::PgConnection>) -> Result<(), Box<dyn std::error::Error>> {
    /// sqlx::query("UPDATE stock SET n = n - 1 WHERE sku = 'tea'")
    ///     .execute(&mut *tx.conn().await?)
    ///     .await?;
    /// # Ok(()) }
    /// ```
    pub async fn conn(&self) -> Result<MappedMutexGuard<'_, C>, Error> {
        self.open.conn().await.ok_or_else(|| {
            Error::Store(StoreError::misconfigured(
                "transaction",
                "the request's transaction has ended: use it only while the handler runs",
            ))
        })
    }
}

/// Outside the transactional mode (a route the layer does not guard, or a
/// layer without [`IdempotencyLayer::transactional`]): 500, naming the
/// misconfiguration.
impl<S: Send + Sync, C: Send + 'static> FromRequestParts<S> for Transaction<C> {
    type Rejection = Response;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, Response> {
        parts.extensions.get::<Self>().cloned().ok_or_else(|| {
            Problem::new(
                500,
                "no-transaction",
                "No transaction",
                "This handler takes idem::http::Transaction, but its request is not guarded by an IdempotencyLayer set with `transactional(store)` (or the connection type differs from the store's).",
            )
            .into_response()
        })
    }
}

impl IdempotencyLayer {
    /// The transactional mode (SPEC §7): for each guarded request, a
    /// transaction on `store` (a `PostgresStore` or `MySqlStore` on the
    /// same table as the layer's handle), given to the handler as
    /// [`Transaction`]. The layer completes the request's record in it and
    /// commits once the handler has returned, before the response is
    /// sent: the handler's writes and the stored response commit together.
    /// A crash or a failed commit before that leaves neither (the retry
    /// runs again, cleanly, once the claim's lease has lapsed); a handler
    /// error, a 5xx or any status not stored rolls back and releases the
    /// claim. The claim itself is committed at once, so a duplicate meanwhile
    /// gets 409 (or waits) instead of waiting on a row lock. A request
    /// without a key, where none is required, gets a transaction too,
    /// committed unless its answer is a 5xx.
    ///
    /// ```no_run
    /// # #[tokio::main] async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// use axum::{Router, routing::post};
    /// use idem::http::{IdempotencyLayer, Transaction};
    /// use idem::{Idempotency, PostgresStore};
    ///
    /// async fn create_order(tx: Transaction<sqlx::PgConnection>) -> Result<&'static str, idem::Error> {
    ///     sqlx::query("INSERT INTO orders DEFAULT VALUES")
    ///         .execute(&mut *tx.conn().await?)
    ///         .await
    ///         .map_err(|err| idem::StoreError::new("orders", err))?;
    ///     Ok("created")
    /// }
    ///
    /// let store = PostgresStore::connect("postgres://app@localhost/app").await?;
    /// store.migrate().await?;
    /// let app: Router = Router::new()
    ///     .route("/orders", post(create_order))
    ///     .layer(IdempotencyLayer::new(Idempotency::new(store.clone())).transactional(store));
    /// # Ok(()) }
    /// ```
    pub fn transactional<T: Transactional>(mut self, store: T) -> Self {
        self.config_mut().transactions = Some(Arc::new(Begins(store)));
        self
    }
}

/// A transaction begun for one request, as the layer holds it.
pub(crate) struct Started {
    /// The store the request's call runs on.
    pub store: Arc<dyn Store>,
    ends: Box<dyn Ends>,
    install: Box<dyn FnOnce(&mut Extensions) + Send + Sync>,
}

impl Started {
    /// Gives the handler its [`Transaction`].
    pub(crate) fn install(&mut self, extensions: &mut Extensions) {
        let install = std::mem::replace(&mut self.install, Box::new(|_| {}));
        install(extensions);
    }

    pub(crate) async fn commit(&self) -> Result<(), StoreError> {
        self.ends.end(true).await
    }

    pub(crate) async fn rollback(&self) {
        if let Err(err) = self.ends.end(false).await {
            // The server rolls back a transaction whose connection failed.
            tracing::debug!(error = %err, "idem: rolling back a request's transaction failed");
        }
    }
}

/// How the layer begins a request's transaction, whatever its store.
pub(crate) trait Begin: Send + Sync {
    fn begin(&self) -> Boxed<'_, Result<Started, StoreError>>;
}

struct Begins<T>(T);

impl<T: Transactional> Begin for Begins<T> {
    fn begin(&self) -> Boxed<'_, Result<Started, StoreError>> {
        Box::pin(async move {
            let begun = self.0.begin().await?;
            let open = Arc::clone(begun.open());
            let handler = Transaction {
                open: Arc::clone(&open),
            };
            Ok(Started {
                store: Arc::clone(begun.store()),
                ends: Box::new(EndsOf(open, PhantomData)),
                install: Box::new(move |extensions| {
                    extensions.insert(handler);
                }),
            })
        })
    }
}

/// Commit or rollback, without the connection's type.
trait Ends: Send + Sync {
    fn end(&self, commit: bool) -> Boxed<'_, Result<(), StoreError>>;
}

struct EndsOf<C>(Arc<dyn Open<C>>, PhantomData<fn() -> C>);

impl<C: 'static> Ends for EndsOf<C> {
    fn end(&self, commit: bool) -> Boxed<'_, Result<(), StoreError>> {
        if commit {
            self.0.commit()
        } else {
            self.0.rollback()
        }
    }
}

/// The request's transaction, when the layer is in the transactional
/// mode; a store that cannot begin one answers for the request.
pub(crate) async fn begin(config: &Config) -> Result<Option<Started>, Response<Body>> {
    match &config.transactions {
        None => Ok(None),
        Some(begins) => match begins.begin().await {
            Ok(started) => Ok(Some(started)),
            Err(err) => Err(Error::Store(err).into_response()),
        },
    }
}

/// How a request's transaction ends, read off its call's outcome.
pub(crate) enum Verdict {
    /// The handler ran and its record completed in the transaction.
    Commit,
    /// The handler ran but its record did not complete: its writes roll
    /// back, and its answer becomes this error.
    Failed(Problem),
    /// The handler did not run, or its answer is not stored.
    Rollback,
}

impl Verdict {
    pub(crate) fn of<T, E>(ran: bool, reported: &Reported<Result<T, Failed<E>>>) -> Self {
        match &reported.result {
            Ok(_) if ran && !reported.replayed => Verdict::Commit,
            Err(Failed::Idem(err)) if ran => Verdict::Failed(Problem::from(err)),
            _ => Verdict::Rollback,
        }
    }
}

/// Ends the request's transaction once its key is settled. Where the
/// client has not had the handler's answer yet, an answer whose writes
/// did not commit becomes the error that says so.
pub(crate) async fn settle(started: &Started, verdict: Verdict, rest: &mut Option<Rest>) {
    let failed = match verdict {
        Verdict::Commit => match started.commit().await {
            Ok(()) => return,
            // Committed or not, the client's retry learns which: a replay,
            // or (once the lease lapses) a clean run.
            Err(err) => Problem::from(&Error::Store(err)),
        },
        Verdict::Failed(problem) => {
            started.rollback().await;
            problem
        }
        Verdict::Rollback => return started.rollback().await,
    };
    tracing::warn!(detail = %failed.detail(), "idem: the handler's transaction did not commit");
    *rest = match rest.take() {
        Some(Rest::Streamed(tail)) => {
            tail.fail("the handler's transaction did not commit");
            None
        }
        _ => Some(Rest::Whole(failed.into_response())),
    };
}

/// A request passed through without a key: in the transactional mode, in
/// a transaction of its own, committed unless the answer is a 5xx.
pub(crate) async fn pass<S, B>(
    config: &Config,
    inner: S,
    mut request: Request<Body>,
) -> Result<Response<Body>, S::Error>
where
    S: Service<Request<Body>, Response = Response<B>>,
    B: http_body::Body<Data = Bytes> + Send + 'static,
    B::Error: Into<BoxError>,
{
    let mut started = match begin(config).await {
        Ok(Some(started)) => started,
        Ok(None) => return crate::request::pass(inner, request).await,
        Err(refused) => return Ok(refused),
    };
    started.install(request.extensions_mut());
    let answer = crate::request::pass(inner, request).await;
    let kept = matches!(&answer, Ok(response) if !response.status().is_server_error());
    if !kept {
        started.rollback().await;
    } else if let Err(err) = started.commit().await {
        return Ok(Error::Store(err).into_response());
    }
    answer
}
