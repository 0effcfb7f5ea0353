//! The settings every SQL store's builder has beside where its table
//! lives, and the two ways to make the store from them: connections of its
//! own (`connect_with`), or the caller's sqlx pool (`on_pool`).

use std::sync::Arc;
use std::time::Duration;

use idem_contract::StoreError;
use sqlx::Pool;

use super::dialect::Dialect;
use super::send::Source;
use super::store::Core;
use crate::completed::Completed;
use crate::conns::{Conns, Init};

/// Connections `connect` opens at most, unless set.
pub(crate) const DEFAULT_MAX_CONNECTIONS: u32 = 10;
/// How long a store operation waits for a connection, unless set.
pub(crate) const DEFAULT_ACQUIRE_TIMEOUT: Duration = Duration::from_secs(5);
/// How long a store operation waits for the server's answer, unless set.
pub(crate) const DEFAULT_RESPONSE_TIMEOUT: Duration = Duration::from_secs(5);
/// How many rows one purge statement deletes, unless set.
pub(crate) const DEFAULT_PURGE_BATCH: u32 = idem_contract::admin::Purge::DEFAULT_BATCH;

/// A SQL store's connection and purge settings.
#[derive(Debug, Clone)]
pub(crate) struct Settings {
    pub max_connections: u32,
    pub acquire_timeout: Duration,
    pub response_timeout: Duration,
    pub purge_batch: u32,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            max_connections: DEFAULT_MAX_CONNECTIONS,
            acquire_timeout: DEFAULT_ACQUIRE_TIMEOUT,
            response_timeout: DEFAULT_RESPONSE_TIMEOUT,
            purge_batch: DEFAULT_PURGE_BATCH,
        }
    }
}

impl Settings {
    /// A store of `sql`'s table on connections of its own to `options`,
    /// each set up by `init` if any, opening one at once so that a wrong
    /// URL fails here.
    pub(crate) async fn connect_with<S: Dialect>(
        self,
        sql: S,
        options: <S::Conn as sqlx::Connection>::Options,
        init: Option<Init<S::Conn>>,
    ) -> Result<Arc<Core<S>>, StoreError> {
        let conns = Conns::new(
            options,
            self.max_connections,
            self.acquire_timeout,
            S::NAMES,
        )
        .init(init);
        conns.acquire().await?.keep();
        Ok(self.build(sql, Source::Own(Box::new(conns))))
    }

    /// A store of `sql`'s table on the caller's pool.
    pub(crate) fn on_pool<S: Dialect>(self, sql: S, pool: Pool<S::Db>) -> Arc<Core<S>> {
        self.build(sql, Source::Pool(pool))
    }

    fn build<S: Dialect>(self, sql: S, conns: Source<S::Conn>) -> Arc<Core<S>> {
        Arc::new(Core {
            sql,
            conns,
            purge_batch: self.purge_batch,
            response_timeout: self.response_timeout,
            completed: Completed::default(),
        })
    }
}
