//! The real stores a case runs on.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use idem::admin::Admin;
use idem::testing::FaultyStore;
use idem::{MemoryStore, MySqlStore, PostgresStore, RedisStore, SqliteStore};

use super::super::tx::SqlTx;
use super::super::{mysql_server, pg_server, redis_server, valkey_server};

/// Which real store a case runs on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Backend {
    /// MemoryStore on tokio's paused clock; a 3 s lease.
    Memory,
    /// SQLite on a temp file, real time; a 400 ms lease.
    Sqlite,
    /// PostgreSQL, a schema of its own per case, real time; 400 ms.
    Postgres,
    /// MySQL/MariaDB, a table of its own per case, real time; 400 ms.
    MySql,
    /// Redis, a key prefix of its own per case, real time; 400 ms. Its
    /// purge has nothing to do (keys expire by `PX`).
    Redis,
    /// Valkey 9 (native compare-and-set: `SET IFEQ`, `DELIFEQ`), as Redis.
    Valkey,
}

impl Backend {
    pub(crate) fn lease(self) -> Duration {
        match self {
            Self::Memory => Duration::from_secs(3),
            _ => Duration::from_millis(400),
        }
    }

    /// The case's store (faults injectable), its operator's side (purge)
    /// where it has one apart from MemoryStore's sweep, its file (SQLite)
    /// and its transactional mode (PostgreSQL, MySQL).
    pub(super) async fn store(
        self,
        case: u32,
    ) -> (
        FaultyStore,
        Option<Arc<dyn Admin>>,
        Option<PathBuf>,
        Option<SqlTx>,
    ) {
        fn both<S: Admin + Clone + 'static>(store: S) -> (FaultyStore, Option<Arc<dyn Admin>>) {
            (FaultyStore::new(store.clone()), Some(Arc::new(store)))
        }
        let (faulty, admin) = match self {
            // 128 records: two a shard, so a claim on a shard with two
            // sweeps it (`Purge`) without evicting a live record.
            Self::Memory => (FaultyStore::new(MemoryStore::with_max_records(128)), None),
            Self::Sqlite => {
                let file = std::env::temp_dir()
                    .join(format!("idem-model-{}-{case}.db", std::process::id()));
                let store = SqliteStore::open(&file).await.expect("open sqlite");
                let (faulty, admin) = both(store);
                return (faulty, admin, Some(file), None);
            }
            Self::Postgres => {
                let url = pg_server::url().await;
                let store = PostgresStore::builder()
                    .schema(pg_server::unique_schema("model"))
                    .migrated(&url)
                    .await;
                let pool = sqlx::PgPool::connect(&url).await.expect("a pool");
                let (faulty, admin) = both(store.clone());
                return (faulty, admin, None, Some(SqlTx::Pg(store, pool)));
            }
            Self::MySql => {
                let url = mysql_server::url().await;
                let store = MySqlStore::builder()
                    .table(mysql_server::unique_table("model"))
                    .migrated(&url)
                    .await;
                let pool = sqlx::MySqlPool::connect(&url).await.expect("a pool");
                let (faulty, admin) = both(store.clone());
                return (faulty, admin, None, Some(SqlTx::My(store, pool)));
            }
            Self::Redis | Self::Valkey => {
                let url = match self {
                    Self::Redis => redis_server::url().await,
                    _ => valkey_server::url().await,
                };
                both(
                    RedisStore::builder()
                        .prefix(format!("idem-model-{}-{case}:", std::process::id()))
                        .connect(&url)
                        .await
                        .expect("connect to Redis or Valkey"),
                )
            }
        };
        (faulty, admin, None, None)
    }
}

/// A SQL store's builder, connected and migrated.
trait Migrated: Sized {
    type Store;
    async fn migrated(self, url: &str) -> Self::Store;
}

impl Migrated for idem::postgres::PostgresStoreBuilder {
    type Store = PostgresStore;
    async fn migrated(self, url: &str) -> PostgresStore {
        let store = self.connect(url).await.expect("connect to PostgreSQL");
        store.migrate().await.expect("migrate");
        store
    }
}

impl Migrated for idem::mysql::MySqlStoreBuilder {
    type Store = MySqlStore;
    async fn migrated(self, url: &str) -> MySqlStore {
        let store = self.connect(url).await.expect("connect to MySQL");
        store.migrate().await.expect("migrate");
        store
    }
}
