//! The connections a SQL store's `connect` keeps: dedicated sqlx
//! connections, reused without a health check.
//!
//! A sqlx pool pings a connection when it is returned (and, by default,
//! before handing it out), so each statement through it costs two or three
//! network turns. Here a connection goes back to the idle list as it is
//! after a statement that succeeded, so a step is one turn. A connection
//! whose statement failed or was cancelled is closed instead; a failure
//! that looks like a lost connection also drops every idle one (after a
//! server restart they are all dead), and the store sends the step once
//! more on a new connection: the steps are written to be safe to repeat.

use std::sync::Mutex;
use std::time::Duration;

use idem_contract::StoreError;
use sqlx::{ConnectOptions, Connection};
use tokio::sync::{Semaphore, SemaphorePermit};

/// What a new connection runs before its first statement: the session
/// settings a store needs (MySQL's limits, which its connect options
/// cannot carry).
pub(crate) type Init<C> =
    Box<dyn for<'c> Fn(&'c mut C) -> crate::answer::Sent<'c, ()> + Send + Sync>;

pub(crate) struct Conns<C: Connection> {
    options: C::Options,
    init: Option<Init<C>>,
    idle: Mutex<Vec<C>>,
    permits: Semaphore,
    acquire_timeout: Duration,
    /// The backend's name in errors, and the server's name in messages.
    backend: &'static str,
    server: &'static str,
}

/// A connection out of the list, with its permit. Dropped without
/// [`Leased::keep`], the connection is closed.
pub(crate) struct Leased<'p, C: Connection> {
    conns: &'p Conns<C>,
    conn: Option<C>,
    _permit: SemaphorePermit<'p>,
}

impl<C: Connection> Conns<C> {
    /// At most `max` connections to the server `options` name; `backend`
    /// and `server` name it in errors (`"postgres"`, `"PostgreSQL"`).
    pub(crate) fn new(
        options: C::Options,
        max: u32,
        acquire_timeout: Duration,
        (backend, server): (&'static str, &'static str),
    ) -> Self {
        Conns {
            options,
            init: None,
            idle: Mutex::new(Vec::new()),
            permits: Semaphore::new(max.max(1) as usize),
            acquire_timeout,
            backend,
            server,
        }
    }

    /// Every new connection runs `init` first.
    #[cfg(any(feature = "postgres", feature = "mysql"))]
    pub(crate) fn init(mut self, init: Option<Init<C>>) -> Self {
        self.init = init;
        self
    }

    pub(crate) async fn acquire(&self) -> Result<Leased<'_, C>, StoreError> {
        // A free permit is taken without the timeout's timer.
        let permit = match self.permits.try_acquire() {
            Ok(permit) => permit,
            Err(_) => self.wait_for_permit().await?,
        };
        let idle = self.lock().pop();
        let conn = match idle {
            Some(conn) => conn,
            None => self.connect().await?,
        };
        Ok(Leased {
            conns: self,
            conn: Some(conn),
            _permit: permit,
        })
    }

    /// A permit, once one is free, within the acquire timeout.
    async fn wait_for_permit(&self) -> Result<SemaphorePermit<'_>, StoreError> {
        let permit = tokio::time::timeout(self.acquire_timeout, self.permits.acquire())
            .await
            .map_err(|_| {
                StoreError::new(
                    self.backend,
                    format!(
                        "no connection became free within {:?} (acquire_timeout): every connection is busy, most often because the server is slow or not answering; raise max_connections only if the server is healthy",
                        self.acquire_timeout
                    ),
                )
            })?
            .expect("the semaphore is never closed");
        Ok(permit)
    }

    /// A new connection, set up by `init`, within the acquire timeout.
    pub(crate) async fn connect(&self) -> Result<C, StoreError> {
        let connected = async {
            let mut conn = self.options.connect().await?;
            if let Some(init) = &self.init {
                init(&mut conn).await?;
            }
            Ok::<C, sqlx::Error>(conn)
        };
        match tokio::time::timeout(self.acquire_timeout, connected).await {
            Ok(Ok(conn)) => Ok(conn),
            Ok(Err(err)) => Err(StoreError::new(self.backend, err)),
            Err(_) => Err(StoreError::new(
                self.backend,
                format!(
                    "{} did not accept a new connection within {:?} (acquire_timeout): the server is stalled or unreachable",
                    self.server, self.acquire_timeout
                ),
            )),
        }
    }

    /// A connection out of the list (or a new one) that the caller keeps
    /// beside the permits, for a request's transaction: given back with
    /// [`put_back`](Self::put_back) once the transaction has ended.
    #[cfg(any(feature = "postgres", feature = "mysql"))]
    pub(crate) async fn take(&self) -> Result<C, StoreError> {
        let idle = self.lock().pop();
        match idle {
            Some(conn) => Ok(conn),
            None => self.connect().await,
        }
    }

    /// A connection back to the list, in a known state.
    pub(crate) fn put_back(&self, conn: C) {
        self.lock().push(conn);
    }

    /// Closes every idle connection: one was found dead.
    #[cfg(any(feature = "postgres", feature = "mysql"))]
    pub(crate) fn drop_idle(&self) {
        let idle = std::mem::take(&mut *self.lock());
        drop(idle);
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<C>> {
        self.idle
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Closes the idle connections politely.
    pub(crate) async fn close(&self) {
        let idle = std::mem::take(&mut *self.lock());
        for conn in idle {
            let _ = conn.close().await;
        }
    }
}

impl<C: Connection> Leased<'_, C> {
    pub(crate) fn conn(&mut self) -> &mut C {
        self.conn.as_mut().expect("present until kept or dropped")
    }

    /// Returns the connection to the idle list: its last statement
    /// succeeded, so it is in a known state.
    pub(crate) fn keep(mut self) {
        if let Some(conn) = self.conn.take() {
            self.conns.lock().push(conn);
        }
    }
}
