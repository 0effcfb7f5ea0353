//! Where the MySQL tests find a server: `IDEM_TEST_MYSQL_URL` if set, else
//! the machine's MariaDB or MySQL on 127.0.0.1:3306 (user `root`, no
//! password, database `test`). Without one the tests fail, saying what to
//! install; they are never skipped.

#![allow(dead_code)]

use std::time::{SystemTime, UNIX_EPOCH};

use sqlx::Connection;
use sqlx::mysql::MySqlConnection;
use tokio::sync::OnceCell;

static SHARED: OnceCell<String> = OnceCell::const_new();

/// The URL of a server for the tests of this process.
pub(crate) async fn url() -> String {
    SHARED
        .get_or_init(|| async {
            let url = std::env::var("IDEM_TEST_MYSQL_URL")
                .unwrap_or_else(|_| "mysql://root@127.0.0.1:3306/test".to_owned());
            if let Err(err) = MySqlConnection::connect(&url).await {
                panic!(
                    "no MySQL or MariaDB server at {url} ({err}). The MySQL tests need one: \
                     install MariaDB 10.6+ or MySQL 8.0+ (Debian: `apt-get install mariadb-server`), \
                     start it, create the database (`mysql -uroot -e 'CREATE DATABASE test'`) \
                     and let root in without a password, or point IDEM_TEST_MYSQL_URL at a \
                     server of yours (mysql://user:password@host:port/database)."
                );
            }
            url
        })
        .await
        .clone()
}

/// A table name no other test or run uses (at most 53 bytes, so the
/// store's suffixes fit). Leftovers of runs older than a day are dropped
/// by [`drop_stale_tables`].
pub(crate) fn unique_table(test: &str) -> String {
    let secs = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs();
    let test: String = test.chars().take(20).collect();
    format!(
        "idem_t_{secs}_{test}_{:08x}",
        idem::store::Token::random().to_u128() as u32
    )
}

/// A connection of the tests' own, beside the store's.
pub(crate) async fn admin() -> MySqlConnection {
    MySqlConnection::connect(&url().await)
        .await
        .expect("admin connection")
}

/// Drops the tables and procedures of test runs older than a day.
pub(crate) async fn drop_stale_tables() {
    let mut conn = admin().await;
    let cutoff = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs()
        - 86_400;
    let stale = |name: &String| {
        let secs = name.split('_').nth(2).and_then(|s| s.parse::<u64>().ok());
        secs.is_some_and(|secs| secs < cutoff)
    };
    let tables: Vec<String> = sqlx::query_scalar(
        "SELECT CAST(table_name AS CHAR) FROM information_schema.tables \
         WHERE table_schema = DATABASE() AND table_name LIKE 'idem\\_t\\_%'",
    )
    .fetch_all(&mut conn)
    .await
    .unwrap_or_default();
    for name in tables.iter().filter(|name| stale(name)) {
        let _ = sqlx::raw_sql(&format!("DROP TABLE IF EXISTS `{name}`"))
            .execute(&mut conn)
            .await;
    }
    let procedures: Vec<String> = sqlx::query_scalar(
        "SELECT CAST(routine_name AS CHAR) FROM information_schema.routines \
         WHERE routine_schema = DATABASE() AND routine_name LIKE 'idem\\_t\\_%'",
    )
    .fetch_all(&mut conn)
    .await
    .unwrap_or_default();
    for name in procedures.iter().filter(|name| stale(name)) {
        let _ = sqlx::raw_sql(&format!("DROP PROCEDURE IF EXISTS `{name}`"))
            .execute(&mut conn)
            .await;
    }
}
