//! Sending one statement of a SQL store for a typed answer: on the
//! caller's sqlx pool, or on the store's own connections with one resend
//! after a lost connection; on both within the response timeout.

use std::time::Duration;

use idem_contract::StoreError;
use sqlx::{Connection, Database, Pool};

use crate::answer::Answer;
use crate::conns::Conns;

/// Where a SQL store's statements go.
pub(crate) enum Source<C: Connection> {
    /// Connections of the store's own (`connect`).
    Own(Box<Conns<C>>),
    /// The caller's pool (`from_pool`).
    Pool(Pool<C::Database>),
}

/// What a store's sending needs to know of its server.
pub(crate) struct Server {
    /// The backend's name in a `StoreError`, and the server's in messages.
    pub names: (&'static str, &'static str),
    /// How long a statement waits for the answer.
    pub response_timeout: Duration,
    /// Whether a failure says the connection itself is gone.
    pub lost_connection: fn(&sqlx::Error) -> bool,
    /// Whether a failure says the server rolled the statement back (a
    /// deadlock, a serialization failure), so that it took no effect.
    pub rolled_back: fn(&sqlx::Error) -> bool,
}

/// How many times a statement the server rolled back is sent again.
pub(crate) const ROLLED_BACK_RESENDS: u32 = 3;

impl Server {
    /// `statement`, failed with a `StoreError` if the server does not
    /// answer within the response timeout.
    pub(crate) async fn timed<T>(
        &self,
        statement: impl Future<Output = T>,
    ) -> Result<T, StoreError> {
        let (backend, server) = self.names;
        let limit = self.response_timeout;
        tokio::time::timeout(limit, statement).await.map_err(|_| {
            StoreError::new(
                backend,
                format!(
                    "{server} did not answer within {limit:?} (response_timeout): the server is stalled or unreachable; whether the operation took effect is unknown, and its claim, if any, ends with its lease"
                ),
            )
        })
    }
}

impl<C> Source<C>
where
    C: Connection,
    C::Database: Database<Connection = C>,
{
    /// Sends one statement. `build(again)` makes it; `again` is true when
    /// it is sent a second time after a lost connection or a rollback.
    /// `err` words a failed statement.
    ///
    /// A statement the server rolled back (a deadlock, a serialization
    /// failure: a purge's batch meeting a completion) took no effect, and
    /// is sent again after a short pause, up to [`ROLLED_BACK_RESENDS`]
    /// times: a completion whose body ran must not fail for it.
    pub(crate) async fn send<Q, T: Answer<C, Q>>(
        &self,
        server: &Server,
        build: impl Fn(bool) -> Q,
        err: impl Fn(sqlx::Error) -> StoreError,
    ) -> Result<T, StoreError> {
        let mut again = false;
        let mut rollbacks = 0;
        loop {
            match self.send_once(server, &build, again).await? {
                Ok(out) => return Ok(out),
                Err(first) if (server.rolled_back)(&first) && rollbacks < ROLLED_BACK_RESENDS => {
                    rollbacks += 1;
                    tracing::debug!(error = %first, "idem: {} rolled a statement back; sending it again", server.names.1);
                    // Apart in time from the statement it met, a little more each time.
                    tokio::time::sleep(Duration::from_millis(5 << rollbacks)).await;
                    again = true;
                }
                Err(failed) => return Err(err(failed)),
            }
        }
    }

    /// Sends one statement, and once more on a new connection after a
    /// lost one; the outer error is the store's (no connection, no answer
    /// in time), the inner the statement's.
    async fn send_once<Q, T: Answer<C, Q>>(
        &self,
        server: &Server,
        build: &impl Fn(bool) -> Q,
        again: bool,
    ) -> Result<Result<T, sqlx::Error>, StoreError> {
        let conns = match self {
            // Boxed: a pool's acquire is a large future (most of a step's),
            // which inline would be copied with every step's future on the
            // store's own connections too.
            Source::Pool(pool) => {
                let sent = Box::pin(async {
                    let mut conn = pool.acquire().await?;
                    T::read(build(again), &mut conn).await
                });
                return server.timed(sent).await;
            }
            Source::Own(conns) => conns,
        };
        let mut leased = conns.acquire().await?;
        // A timeout drops `leased`, closing a connection in an unknown state.
        match server.timed(T::read(build(again), leased.conn())).await? {
            Ok(out) => {
                leased.keep();
                Ok(Ok(out))
            }
            // The connection died (an idle one found dead, a session
            // killed, a server restarted): the steps are safe to repeat,
            // so send it once more on a new connection (boxed: it is rare,
            // and inline it would enlarge every step's future).
            Err(first) if (server.lost_connection)(&first) => {
                drop(leased);
                conns.drop_idle();
                tracing::debug!(error = %first, "idem: a {} connection was lost; sending again on a new one", server.names.1);
                Box::pin(async {
                    let mut leased = conns.acquire().await?;
                    let out = server.timed(T::read(build(true), leased.conn())).await?;
                    if out.is_ok() {
                        leased.keep();
                    }
                    Ok(out)
                })
                .await
            }
            // The statement failed on a live connection: close it all the
            // same, its state (an aborted transaction, an open one inside
            // a procedure?) is not worth reasoning about.
            Err(other) => Ok(Err(other)),
        }
    }

    /// `run` on a connection of its own (a new one, closed after, for
    /// the store's own connections; one from the caller's pool): for
    /// migrations, which hold locks and leave session state.
    pub(crate) async fn on_one<T>(
        &self,
        backend: &'static str,
        run: impl AsyncFnOnce(&mut C) -> Result<T, sqlx::Error>,
    ) -> Result<T, StoreError> {
        let err = |err| StoreError::new(backend, err);
        match self {
            Source::Own(conns) => {
                let mut conn = conns.connect().await?;
                let out = run(&mut conn).await.map_err(err)?;
                let _ = conn.close().await;
                Ok(out)
            }
            Source::Pool(pool) => {
                let mut conn = pool.acquire().await.map_err(err)?;
                run(&mut conn).await.map_err(err)
            }
        }
    }

    /// Closes the store's idle connections, or the caller's pool.
    pub(crate) async fn close(&self) {
        match self {
            Source::Own(conns) => conns.close().await,
            Source::Pool(pool) => pool.close().await,
        }
    }

    /// How the store connects, for `Debug`.
    pub(crate) fn kind(&self) -> &'static str {
        match self {
            Source::Own(_) => "own",
            Source::Pool(_) => "sqlx pool",
        }
    }
}
