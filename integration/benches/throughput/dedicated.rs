//! Dedicated connections reused without a ping, as the SQL stores'
//! `connect` keeps them, and the keys of the raw baselines: their side of
//! the comparison, for PostgreSQL and MySQL alike.

use std::sync::Mutex;

use sqlx::{ConnectOptions, Connection};
use tokio::sync::Semaphore;

pub(crate) struct Dedicated<C: Connection> {
    options: C::Options,
    idle: Mutex<Vec<C>>,
    permits: Semaphore,
}

impl<C: Connection> Dedicated<C> {
    /// At most `max` connections to the server `options` name.
    pub(crate) fn new(options: C::Options, max: usize) -> Self {
        Dedicated {
            options,
            idle: Mutex::new(Vec::new()),
            permits: Semaphore::new(max),
        }
    }

    /// `statement` run on an idle connection (or a new one), which then
    /// goes back to the idle list unchecked.
    pub(crate) async fn with<T>(&self, statement: impl AsyncFnOnce(&mut C) -> T) -> T {
        let _permit = self.permits.acquire().await.unwrap();
        let idle = self.idle.lock().unwrap().pop();
        let mut conn = match idle {
            Some(conn) => conn,
            None => self.options.connect().await.unwrap(),
        };
        let out = statement(&mut conn).await;
        self.idle.lock().unwrap().push(conn);
        out
    }
}

/// A raw subject's 32-byte key, the size of idem's hashed keys, without
/// hashing (that is idem's own work).
pub(crate) fn raw_key(n: i64) -> [u8; 32] {
    let mut key = [0u8; 32];
    key[24..].copy_from_slice(&n.to_be_bytes());
    key
}
