//! The stores the scale bench measures, each at every size: a table (or
//! key prefix) per size, how another replica connects to it, and how its
//! bytes are read; each left as the bench found the server.

use std::sync::Arc;

use idem::{Idempotency, MySqlStore, PostgresStore, RedisStore, SqliteStore};

use crate::{Sized, Table, env_url, scale, tag};

pub(crate) async fn sqlite(sizes: &[u64]) -> Vec<Sized> {
    let mut tables = Vec::new();
    let mut paths = Vec::new();
    for &size in sizes {
        let path = std::env::temp_dir().join(format!("idem-scale-{}.db", tag()));
        let store = SqliteStore::open(&path).await.unwrap();
        let pool = sqlx::SqlitePool::connect(&format!("sqlite://{}", path.display()))
            .await
            .unwrap();
        let (at, settled) = (path.clone(), pool.clone());
        tables.push(Table {
            size,
            admin: Arc::new(store.clone()),
            idem: Idempotency::new(store),
            replica: async move || Idempotency::new(SqliteStore::open(&at).await.unwrap()),
            bytes: async move || {
                let pages: i64 = sqlx::query_scalar(
                    "SELECT page_count * page_size FROM pragma_page_count, pragma_page_size",
                )
                .fetch_one(&pool)
                .await
                .unwrap();
                pages as f64
            },
            // The fill's pages out of the WAL, into the file itself.
            settle: async move || {
                let checkpoint = "PRAGMA wal_checkpoint(TRUNCATE)";
                sqlx::query(checkpoint).execute(&settled).await.unwrap();
            },
        });
        paths.push(path);
    }
    let out = scale(&tables).await;
    for path in paths {
        for suffix in ["", "-wal", "-shm"] {
            let _ = std::fs::remove_file(format!("{}{suffix}", path.display()));
        }
    }
    out
}

pub(crate) async fn postgres(sizes: &[u64]) -> Vec<Sized> {
    let url = env_url(
        "IDEM_TEST_DATABASE_URL",
        "postgres://postgres@127.0.0.1:5432/test",
    );
    let pool = sqlx::PgPool::connect(&url).await.unwrap();
    let (mut tables, mut schemas) = (Vec::new(), Vec::new());
    for &size in sizes {
        let schema = format!("scale_{}", tag());
        let connect = {
            let (url, schema) = (url.clone(), schema.clone());
            async move || {
                let builder = PostgresStore::builder().schema(schema.clone());
                builder.connect(&url).await.unwrap()
            }
        };
        let store = connect().await;
        store.migrate().await.unwrap();
        let (pool, table) = (pool.clone(), store.table().to_owned());
        let (settled, vacuum) = (pool.clone(), format!("VACUUM (ANALYZE) {table}"));
        tables.push(Table {
            size,
            admin: Arc::new(store.clone()),
            idem: Idempotency::new(store),
            replica: async move || Idempotency::new(connect().await),
            bytes: async move || {
                let size = format!("SELECT pg_total_relation_size('{table}')");
                let bytes: i64 = sqlx::query_scalar(&size).fetch_one(&pool).await.unwrap();
                bytes as f64
            },
            // The fill's dead row versions (each record written twice)
            // gone, as autovacuum leaves a table in service.
            settle: async move || {
                sqlx::raw_sql(&vacuum).execute(&settled).await.unwrap();
            },
        });
        schemas.push(schema);
    }
    let out = scale(&tables).await;
    for schema in schemas {
        let drop = format!("DROP SCHEMA \"{schema}\" CASCADE");
        sqlx::query(&drop).execute(&pool).await.unwrap();
    }
    out
}

pub(crate) async fn mysql(sizes: &[u64]) -> Vec<Sized> {
    let url = env_url("IDEM_TEST_MYSQL_URL", "mysql://root@127.0.0.1:3306/test");
    let pool = sqlx::MySqlPool::connect(&url).await.unwrap();
    let (mut tables, mut names) = (Vec::new(), Vec::new());
    for &size in sizes {
        let table = format!("scale_{}", tag());
        let connect = {
            let (url, table) = (url.clone(), table.clone());
            async move || {
                let builder = MySqlStore::builder().table(table.clone());
                builder.connect(&url).await.unwrap()
            }
        };
        let store = connect().await;
        store.migrate().await.unwrap();
        let (pool, name) = (pool.clone(), table.clone());
        let settled = pool.clone();
        tables.push(Table {
            size,
            admin: Arc::new(store.clone()),
            idem: Idempotency::new(store),
            replica: async move || Idempotency::new(connect().await),
            bytes: async move || {
                let analyze = format!("ANALYZE TABLE `{name}`");
                sqlx::query(&analyze).execute(&pool).await.unwrap();
                let bytes: u64 = sqlx::query_scalar(
                    "SELECT CAST(data_length + index_length AS UNSIGNED) \
                     FROM information_schema.tables WHERE table_schema = DATABASE() AND table_name = ?",
                )
                .bind(&name)
                .fetch_one(&pool)
                .await
                .unwrap();
                bytes as f64
            },
            settle: async move || innodb_purged(&settled).await,
        });
        names.push(table);
    }
    let out = scale(&tables).await;
    for table in names {
        crate::mysql_tables::drop_store_table(&pool, &table).await;
    }
    out
}

/// Waits (up to 10 minutes) until InnoDB has purged the undo of the
/// fill's updates down to a thousand transactions.
async fn innodb_purged(pool: &sqlx::MySqlPool) {
    let history = "SELECT `COUNT` FROM information_schema.INNODB_METRICS \
         WHERE NAME = 'trx_rseg_history_len'";
    for _ in 0..600 {
        let left: i64 = sqlx::query_scalar(history).fetch_one(pool).await.unwrap();
        if left < 1_000 {
            return;
        }
        tokio::time::sleep(std::time::Duration::from_secs(1)).await;
    }
    eprintln!("scale: InnoDB's history list still long after 10 minutes");
}

pub(crate) async fn redis(sizes: &[u64]) -> Vec<Sized> {
    let url = env_url("IDEM_TEST_REDIS_URL", "redis://127.0.0.1:6379");
    let client = redis::Client::open(url.clone()).unwrap();
    let conn = client.get_multiplexed_async_connection().await.unwrap();
    let (mut tables, mut prefixes) = (Vec::new(), Vec::new());
    for &size in sizes {
        let prefix = format!("scale-{}:", tag());
        let connect = {
            let (url, prefix) = (url.clone(), prefix.clone());
            async move || {
                let builder = RedisStore::builder().prefix(&prefix);
                builder.connect(&url).await.unwrap()
            }
        };
        let store = connect().await;
        let (conn, prefix_) = (conn.clone(), prefix.clone());
        tables.push(Table {
            size,
            admin: Arc::new(store.clone()),
            idem: Idempotency::new(store),
            replica: async move || Idempotency::new(connect().await),
            bytes: async move || redis_bytes(&mut conn.clone(), &prefix_).await,
            // Keys are written in place: nothing left to do.
            settle: async || {},
        });
        prefixes.push(prefix);
    }
    let out = scale(&tables).await;
    for prefix in prefixes {
        crate::redis_keys::unlink_prefixed(&mut conn.clone(), &prefix).await;
    }
    out
}

/// The bytes of the keys under `prefix`: `MEMORY USAGE` of a sample.
async fn redis_bytes(conn: &mut redis::aio::MultiplexedConnection, prefix: &str) -> f64 {
    let keys = redis_keys(conn, prefix).await;
    let sample = &keys[..keys.len().min(2_000)];
    let mut sum = 0u64;
    for key in sample {
        let used: Option<u64> = redis::cmd("MEMORY")
            .arg("USAGE")
            .arg(key)
            .query_async(conn)
            .await
            .unwrap();
        sum += used.unwrap_or(0);
    }
    sum as f64 * keys.len() as f64 / sample.len().max(1) as f64
}

/// The keys under `prefix`, as bytes: idem's keys hold the record key's
/// raw hash, which is not UTF-8.
async fn redis_keys(conn: &mut redis::aio::MultiplexedConnection, prefix: &str) -> Vec<Vec<u8>> {
    let mut keys = Vec::new();
    let mut cursor = 0u64;
    loop {
        let (next, batch): (u64, Vec<Vec<u8>>) = redis::cmd("SCAN")
            .arg(cursor)
            .arg("MATCH")
            .arg(format!("{prefix}*"))
            .arg("COUNT")
            .arg(5_000)
            .query_async(conn)
            .await
            .unwrap();
        keys.extend(batch);
        if next == 0 {
            return keys;
        }
        cursor = next;
    }
}
