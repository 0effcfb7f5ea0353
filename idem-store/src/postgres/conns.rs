//! The connections `PostgresStore::connect` keeps: dedicated
//! `PgConnection`s, reused without a health check.
//!
//! A sqlx `PgPool` pings a connection when it is returned (and, by default,
//! before handing it out), so each statement through it costs two or three
//! network turns. Here a connection goes back to the idle list as it is
//! after a statement that succeeded, so a step is one turn. A connection
//! whose statement failed or was cancelled is closed instead; a failure
//! that looks like a lost connection also drops every idle one (after a
//! server restart they are all dead), and the step is sent once more on a
//! new connection: the steps are written to be safe to repeat.

use std::sync::Mutex;
use std::time::Duration;

use idem_core::StoreError;
use sqlx::postgres::{PgConnectOptions, PgConnection};
use sqlx::{ConnectOptions, Connection};
use tokio::sync::{Semaphore, SemaphorePermit};

pub(super) struct Conns {
    options: PgConnectOptions,
    idle: Mutex<Vec<PgConnection>>,
    permits: Semaphore,
    acquire_timeout: Duration,
}

/// A connection out of the list, with its permit. Dropped without
/// [`Leased::keep`], the connection is closed.
pub(super) struct Leased<'p> {
    conns: &'p Conns,
    conn: Option<PgConnection>,
    _permit: SemaphorePermit<'p>,
}

impl Conns {
    pub(super) fn new(options: PgConnectOptions, max: u32, acquire_timeout: Duration) -> Self {
        Conns {
            options,
            idle: Mutex::new(Vec::new()),
            permits: Semaphore::new(max.max(1) as usize),
            acquire_timeout,
        }
    }

    pub(super) async fn acquire(&self) -> Result<Leased<'_>, StoreError> {
        let permit = tokio::time::timeout(self.acquire_timeout, self.permits.acquire())
            .await
            .map_err(|_| {
                StoreError::new(
                    "postgres",
                    format!(
                        "no connection became free within {:?} (acquire_timeout): every connection is busy, most often because the server is slow or not answering; raise max_connections only if the server is healthy",
                        self.acquire_timeout
                    ),
                )
            })?
            .expect("the semaphore is never closed");
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

    /// A new connection, within the acquire timeout.
    pub(super) async fn connect(&self) -> Result<PgConnection, StoreError> {
        match tokio::time::timeout(self.acquire_timeout, self.options.connect()).await {
            Ok(Ok(conn)) => Ok(conn),
            Ok(Err(err)) => Err(StoreError::new("postgres", err)),
            Err(_) => Err(StoreError::new(
                "postgres",
                format!(
                    "PostgreSQL did not accept a new connection within {:?} (acquire_timeout): the server is stalled or unreachable",
                    self.acquire_timeout
                ),
            )),
        }
    }

    /// Closes every idle connection: one was found dead.
    pub(super) fn drop_idle(&self) {
        let idle = std::mem::take(&mut *self.lock());
        drop(idle);
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<PgConnection>> {
        self.idle
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Closes the idle connections politely.
    pub(super) async fn close(&self) {
        let idle = std::mem::take(&mut *self.lock());
        for conn in idle {
            let _ = conn.close().await;
        }
    }
}

impl Leased<'_> {
    pub(super) fn conn(&mut self) -> &mut PgConnection {
        self.conn.as_mut().expect("present until kept or dropped")
    }

    /// Returns the connection to the idle list: its last statement
    /// succeeded, so it is in a known state.
    pub(super) fn keep(mut self) {
        if let Some(conn) = self.conn.take() {
            self.conns.lock().push(conn);
        }
    }
}

/// Whether `err` says the connection itself is gone (rather than the
/// statement failing), so that sending the step again on a new connection
/// may succeed.
pub(super) fn lost_connection(err: &sqlx::Error) -> bool {
    match err {
        sqlx::Error::Io(_) | sqlx::Error::Protocol(_) | sqlx::Error::Tls(_) => true,
        sqlx::Error::Database(db) => db.code().is_some_and(|code| {
            // 08: connection exception; 57P01..57P03: admin or crash
            // shutdown, cannot connect now.
            code.starts_with("08") || matches!(&*code, "57P01" | "57P02" | "57P03")
        }),
        _ => false,
    }
}
