//! The store's statements on its own connections to the file
//! (`crate::conns`), each sent for a typed answer (`crate::answer`).
//!
//! Not a sqlx pool: each sqlx SQLite connection is a thread, and a pool
//! pings a connection on its thread when it is returned and hands out the
//! one idle longest, so a lone caller's every statement made three thread
//! hops on a connection gone cold. Here a statement is one hop, on the
//! connection used last. A connection whose statement failed is closed.

use idem_contract::StoreError;
use sqlx::Connection;
use sqlx::sqlite::{SqliteArguments, SqliteConnection, SqliteRow};

use super::{SqliteStore, err};
use crate::answer::Answer;

/// A statement with its arguments bound.
pub(super) type SqliteQuery<'q> = sqlx::query::Query<'q, sqlx::Sqlite, SqliteArguments<'q>>;

impl SqliteStore {
    /// Sends `query` on one of the store's connections for its answer `T`.
    pub(super) async fn send<'q, T>(&self, query: SqliteQuery<'q>) -> Result<T, StoreError>
    where
        T: Answer<SqliteConnection, SqliteQuery<'q>>,
    {
        let mut leased = self.conns.acquire().await?;
        let out = T::read(query, leased.conn()).await.map_err(err)?;
        leased.keep();
        Ok(out)
    }

    /// Runs `work` in one `BEGIN IMMEDIATE` transaction (the write lock
    /// taken at once) on one connection, committed when it succeeds.
    pub(super) async fn in_transaction<T>(
        &self,
        work: impl AsyncFnOnce(&mut SqliteConnection) -> Result<T, sqlx::Error>,
    ) -> Result<T, StoreError> {
        let mut leased = self.conns.acquire().await?;
        let mut tx = leased
            .conn()
            .begin_with("BEGIN IMMEDIATE")
            .await
            .map_err(err)?;
        let out = work(&mut tx).await.map_err(err)?;
        tx.commit().await.map_err(err)?;
        leased.keep();
        Ok(out)
    }
}

crate::answer::answers!(SqliteConnection, SqliteQuery, SqliteRow);
