//! Dedicated connections reused without a ping, as the SQL stores'
//! `connect` keeps them, and the keys of the raw baselines: their side of
//! the comparison, for PostgreSQL, MySQL and SQLite alike.

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

/// A raw subject's 32-byte key: as long as idem's hashed keys and spread
/// over the table's index as they are, without hashing (that is idem's own
/// work). Keys in order would all fall on the index's last pages, which
/// the server keeps hot in its CPU's cache: a lookup or insert that idem's
/// keys, spread over every page, cannot match whatever the client does.
pub(crate) fn raw_key(n: i64) -> [u8; 32] {
    let mut key = [0u8; 32];
    key[..8].copy_from_slice(&spread(n as u64).to_be_bytes());
    key[24..].copy_from_slice(&n.to_be_bytes());
    key
}

/// splitmix64's finalizer: one-to-one on `u64`, its outputs as if random
/// (three lines, not worth a dependency of the bench).
fn spread(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}
