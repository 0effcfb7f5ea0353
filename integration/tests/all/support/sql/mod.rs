//! What the PostgreSQL and MySQL tests share, written once: cases generic
//! over [`SqlServer`], which says how a server builds a store at a place of
//! its own (a schema, a table) and speaks the tests' own SQL. A test file
//! runs them, one test each named after its case, with [`store_cases!`]
//! or [`tx_cases!`], as the conformance suite runs its cases over every
//! store, and keeps only what is its own (dialect SQL, server faults).
//!
//! A server's impl is beside this module: `support/sql_pg.rs`,
//! `support/sql_mysql.rs`.

#![allow(dead_code)]

pub(crate) mod admin;
pub(crate) mod faults;
pub(crate) mod race;
pub(crate) use super::turn_proxy;
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
    /// How many migrations this release's store has.
    const MIGRATIONS: i32;

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
    /// The rows of `from` (a table, with a `WHERE` clause or not),
    /// counted on a connection of the test's own.
    async fn count(from: &str) -> i64;
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
                $crate::support::sql::$module::$case::<$server>($($($arg),*)?).await;
            }
        )+
    };
}
#[allow(unused_imports, reason = "round_trips.rs runs no case of its own")]
pub(crate) use sql_cases;

/// The shared cases of a store on `$server`, but the transactional ones;
/// its migrations table refused at `$version`, a version it does not
/// know.
#[allow(unused_macros, reason = "round_trips.rs runs no case of its own")]
macro_rules! store_cases {
    ($server:ty, unknown_version = $version:expr) => {
        $crate::support::sql::sql_cases!($server;
            admin::migrate_refuses_an_unknown_schema_version($version),
            admin::purge_expired_deletes_only_expired_rows_in_batches,
            admin::a_store_used_before_migrate_says_to_migrate,
            admin::admin_lists_counts_and_compacts_tombstones,
            turns::each_step_is_one_round_trip,
            race::two_processes_racing_run_each_body_once(module_path!()),
            race::race_worker,
        );
    };
}
#[allow(unused_imports, reason = "round_trips.rs runs no case of its own")]
pub(crate) use store_cases;

/// The shared cases of the transactional mode on `$server`.
#[allow(unused_macros, reason = "round_trips.rs runs no case of its own")]
macro_rules! tx_cases {
    ($server:ty) => {
        $crate::support::sql::sql_cases!($server;
            tx::a_failing_body_leaves_no_order_and_no_record_and_the_retry_runs,
            tx::a_transaction_dropped_before_commit_leaves_nothing_and_the_retry_runs_at_once,
            tx::a_committed_call_makes_one_order_and_duplicates_replay,
            tx::a_concurrent_duplicate_waits_for_the_commit_then_replays,
            tx::a_claim_won_after_a_rolled_back_holder_holds_a_whole_lease,
            tx::a_tombstone_is_kept_in_the_transactional_mode,
            tx::a_step_on_a_transaction_handle_is_refused_before_it_runs,
            tx::forget_on_a_transaction_commits_or_rolls_back_with_it,
            tx::a_handle_commits_and_rolls_back_the_body_s_write_with_the_record,
        );
    };
}
#[allow(unused_imports, reason = "round_trips.rs runs no case of its own")]
pub(crate) use tx_cases;

/// The [`SqlServer`] items that are alike on every server, in its impl:
/// the stores' builders and options have the same methods under the same
/// names. `$place => $builder` says how a builder names a place.
macro_rules! alike_on_every_server {
    ($store:ty, $place:ident => $builder:expr) => {
        fn upstream(options: &$crate::support::sql::Options<Self>) -> String {
            format!("{}:{}", options.get_host(), options.get_port())
        }

        fn via(
            options: $crate::support::sql::Options<Self>,
            port: u16,
        ) -> $crate::support::sql::Options<Self> {
            options.host("127.0.0.1").port(port)
        }

        async fn connect_with(
            $place: &str,
            knobs: $crate::support::sql::Knobs,
            options: $crate::support::sql::Options<Self>,
        ) -> Result<$store, ::idem::StoreError> {
            let mut builder = $builder;
            if let Some(max) = knobs.max_connections {
                builder = builder.max_connections(max);
            }
            if let Some(timeout) = knobs.acquire_timeout {
                builder = builder.acquire_timeout(timeout);
            }
            if let Some(rows) = knobs.purge_batch {
                builder = builder.purge_batch(rows);
            }
            builder.connect_with(options).await
        }

        fn from_pool($place: &str, pool: ::sqlx::Pool<Self::Db>) -> $store {
            $builder.from_pool(pool).unwrap()
        }

        async fn migrate(store: &$store) -> Result<(), ::idem::StoreError> {
            store.migrate().await
        }

        fn table(store: &$store) -> &str {
            store.table()
        }

        async fn purge_expired(store: &$store) -> u64 {
            store.purge_expired().await.unwrap()
        }
    };
}
pub(crate) use alike_on_every_server;
