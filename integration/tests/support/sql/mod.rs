//! What the PostgreSQL and MySQL tests share, written once: cases generic
//! over [`SqlServer`], which says how a server builds a store at a place of
//! its own (a schema, a table) and speaks the tests' own SQL. A test file
//! runs them with [`sql_cases!`], as the conformance
//! suite runs its cases over every store, and keeps only what is its own.
//!
//! A server's impl (`support/sql_pg.rs`, `support/sql_mysql.rs`) is
//! included beside this module by the binaries that use it.

#![allow(dead_code)]

pub(crate) mod admin;
pub(crate) mod faults;
pub(crate) mod race;
#[path = "../turn_proxy.rs"]
pub(crate) mod turn_proxy;
pub(crate) mod turns;
pub(crate) mod tx;

use std::time::Duration;

use idem::admin::Admin;
use idem::fingerprint::Fingerprint;
use idem::store::{Claim, Token};
use idem::{Store, StoreError};
use sqlx::Database;
use sqlx::pool::{Pool, PoolOptions};

/// Connect options of a server's driver.
pub(crate) type Options<S> =
    <<<S as SqlServer>::Db as Database>::Connection as sqlx::Connection>::Options;

/// A server the SQL cases run on: its store, and the SQL the tests send
/// it themselves.
pub(crate) trait SqlServer: 'static {
    /// The store on this server.
    type Store: Store + Admin + Clone + Send + Sync + 'static;
    /// The sqlx driver.
    type Db: Database;
    /// The store's type name, as its errors say it.
    const NAME: &'static str;
    /// The site the tests' own claims carry.
    const SITE: &'static str;

    /// The test server's URL.
    async fn url() -> String;
    /// A place (schema, table) named after `test` that no other test or
    /// run uses.
    fn unique(test: &str) -> String;
    /// Drops the places of test runs older than a day.
    async fn drop_stale();
    /// `options` with their host and port (its "host:port") for a proxy.
    fn upstream(options: &Options<Self>) -> String;
    /// `options` pointed at `127.0.0.1:port` instead.
    fn via(options: Options<Self>, port: u16) -> Options<Self>;
    /// A store at `place`, not migrated.
    async fn connect_with(
        place: &str,
        knobs: Knobs,
        options: Options<Self>,
    ) -> Result<Self::Store, StoreError>;
    /// A store at `place` on a pool of the caller's.
    fn from_pool(place: &str, pool: Pool<Self::Db>) -> Self::Store;
    /// `store.migrate()`.
    async fn migrate(store: &Self::Store) -> Result<(), StoreError>;
    /// `store.table()`: the records' table, quoted.
    fn table(store: &Self::Store) -> &str;
    /// `store.purge_expired()`.
    async fn purge_expired(store: &Self::Store) -> u64;
    /// A store on `table` at the server's default place, not migrated.
    async fn connect_table(table: &str) -> Result<Self::Store, StoreError>;
    /// Records `version` as applied in `migrations`, as a migration would.
    async fn record_version(migrations: &str, version: i32);
    /// Runs `sql` on a connection of the test's own.
    async fn execute(sql: &str);
    /// The rows of `table`, counted on a connection of the test's own.
    async fn count(table: &str) -> i64;
    /// The versions recorded in `migrations`, in order.
    async fn versions(migrations: &str) -> Vec<i32>;
}

/// The builder's settings a case chooses; unset, the store's defaults.
#[derive(Clone, Copy, Default)]
pub(crate) struct Knobs {
    pub(crate) max_connections: Option<u32>,
    pub(crate) acquire_timeout: Option<Duration>,
    pub(crate) purge_batch: Option<u32>,
}

/// The test server's connect options.
pub(crate) async fn options<S: SqlServer>() -> Options<S> {
    S::url().await.parse().expect("the test server's URL")
}

/// A store at a place of its own, named after `test`, migrated.
pub(crate) async fn store<S: SqlServer>(test: &str) -> S::Store {
    store_at::<S>(&S::unique(test)).await
}

/// A store at `place`, migrated.
pub(crate) async fn store_at<S: SqlServer>(place: &str) -> S::Store {
    let store = S::connect_with(place, Knobs::default(), options::<S>().await)
        .await
        .expect("connect");
    S::migrate(&store).await.expect("migrate");
    store
}

/// A pool of at most one connection on `options`, testing connections
/// before use or not (sqlx's default is to test).
pub(crate) async fn one_connection<S: SqlServer>(
    options: Options<S>,
    test_before_acquire: bool,
) -> Pool<S::Db> {
    PoolOptions::<S::Db>::new()
        .max_connections(1)
        .test_before_acquire(test_before_acquire)
        .connect_with(options)
        .await
        .unwrap()
}

/// A claim of the tests' own on `lease`.
pub(crate) fn claim<S: SqlServer>(lease: Duration) -> Claim {
    Claim::new(Token::random(), Fingerprint::NONE, lease, S::SITE)
}

/// The versions table beside a quoted records table: its name with
/// `_migrations`, inside the closing quote.
pub(crate) fn migrations(table: &str) -> String {
    let (name, quote) = table.split_at(table.len() - 1);
    format!("{name}_migrations{quote}")
}

/// One test per shared case, named after it, on server `$server`, each
/// on a multi-thread runtime as the conformance suite's: `sql_cases!(Pg;
/// admin::purge_expired_deletes_only_expired_rows_in_batches,
/// admin::migrate_refuses_an_unknown_schema_version(5), …)`.
#[allow(unused_macros, reason = "round_trips.rs runs no case of its own")]
macro_rules! sql_cases {
    ($server:ty; $($module:ident :: $case:ident $(($($arg:expr),*))?),+ $(,)?) => {
        $(
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $case() {
                $crate::sql::$module::$case::<$server>($($($arg),*)?).await;
            }
        )+
    };
}
#[allow(unused_imports, reason = "round_trips.rs runs no case of its own")]
pub(crate) use sql_cases;

/// `$builder` with the settings of `$knobs` that are set: builders of
/// every server have these methods, under the same names.
macro_rules! with_knobs {
    ($builder:expr, $knobs:expr) => {{
        let (mut builder, knobs): (_, $crate::sql::Knobs) = ($builder, $knobs);
        if let Some(max) = knobs.max_connections {
            builder = builder.max_connections(max);
        }
        if let Some(timeout) = knobs.acquire_timeout {
            builder = builder.acquire_timeout(timeout);
        }
        if let Some(rows) = knobs.purge_batch {
            builder = builder.purge_batch(rows);
        }
        builder
    }};
}
pub(crate) use with_knobs;
