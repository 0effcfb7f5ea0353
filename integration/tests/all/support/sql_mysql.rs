//! The SQL cases' server on MySQL or MariaDB: a place is a table of its
//! own (and the tables named after it).

use idem::{MySqlStore, StoreError};
use sqlx::MySql;
use sqlx::mysql::MySqlConnection;

use super::mysql_server;
use crate::support::sql::race::RaceServer;
use crate::support::sql::tx::{
    Order, TxServer, handle_inserting_an_order, place_in_inserting_an_order,
};
use crate::support::sql::{SqlServer, alike_on_every_server};

/// MySQL or MariaDB, as `mysql_server` finds it.
pub(crate) struct MySqlServer;

impl SqlServer for MySqlServer {
    type Store = MySqlStore;
    type Db = MySql;
    const NAME: &'static str = "MySqlStore";
    const SITE: &'static str = "mysql-test";
    const MIGRATIONS: i32 = 5;

    async fn url() -> String {
        mysql_server::url().await
    }

    fn unique(test: &str) -> String {
        mysql_server::unique_table(test)
    }

    async fn drop_stale() {
        mysql_server::drop_stale_tables().await;
    }

    alike_on_every_server!(MySqlStore, place => MySqlStore::builder().table(place));

    async fn connect_table(table: &str) -> Result<MySqlStore, StoreError> {
        let url = mysql_server::url().await;
        MySqlStore::builder().table(table).connect(&url).await
    }

    async fn record_version(migrations: &str, version: i32) {
        Self::execute(&format!(
            "INSERT INTO {migrations} (version, applied_at) VALUES ({version}, UTC_TIMESTAMP(6))"
        ))
        .await;
    }

    async fn execute(sql: &str) {
        let mut admin = mysql_server::admin().await;
        sqlx::raw_sql(sql).execute(&mut admin).await.unwrap();
    }

    async fn count(from: &str) -> i64 {
        sqlx::query_scalar(&format!("SELECT COUNT(*) FROM {from}"))
            .fetch_one(&mut mysql_server::admin().await)
            .await
            .unwrap()
    }

    async fn versions(migrations: &str) -> Vec<i32> {
        sqlx::query_scalar(&format!(
            "SELECT version FROM {migrations} ORDER BY version"
        ))
        .fetch_all(&mut mysql_server::admin().await)
        .await
        .unwrap()
    }
}

impl RaceServer for MySqlServer {
    const URL_VAR: &'static str = "IDEM_TEST_MYSQL_URL";
    type Conn = MySqlConnection;

    fn runs_table(place: &str) -> String {
        format!("`{place}_runs`")
    }

    async fn create_runs(runs: &str) {
        Self::execute(&format!(
            "CREATE TABLE {runs} (k INT PRIMARY KEY, n INT NOT NULL)"
        ))
        .await;
    }

    async fn connect() -> MySqlConnection {
        mysql_server::admin().await
    }

    async fn bump(conn: &mut MySqlConnection, runs: &str, key: u32) -> Result<(), sqlx::Error> {
        let bump =
            format!("INSERT INTO {runs} (k, n) VALUES (?, 1) ON DUPLICATE KEY UPDATE n = n + 1");
        sqlx::query(&bump).bind(key as i32).execute(conn).await?;
        Ok(())
    }

    async fn totals(runs: &str) -> (i64, i64, i64) {
        sqlx::query_as(&format!(
            "SELECT COUNT(*), CAST(COALESCE(SUM(n), 0) AS SIGNED), \
             CAST(COALESCE(MAX(n), 0) AS SIGNED) FROM {runs}"
        ))
        .fetch_one(&mut mysql_server::admin().await)
        .await
        .unwrap()
    }
}

impl TxServer for MySqlServer {
    fn orders_table(place: &str) -> String {
        format!("`{place}_orders`")
    }

    fn create_orders(orders: &str) -> String {
        format!(
            "CREATE TABLE {orders} (id BIGINT UNSIGNED AUTO_INCREMENT PRIMARY KEY, \
             order_key VARCHAR(64) NOT NULL, sku VARCHAR(64) NOT NULL) ENGINE = InnoDB"
        )
    }

    place_in_inserting_an_order!(MySqlConnection);

    handle_inserting_an_order!(idem::mysql::TxHandle);
}

/// Inserts the order `key` of `sku` into `orders` on `conn`.
pub(crate) async fn insert_order(
    conn: &mut MySqlConnection,
    orders: &str,
    key: &str,
    sku: &str,
) -> Order {
    let done = sqlx::query(&format!(
        "INSERT INTO {orders} (order_key, sku) VALUES (?, ?)"
    ))
    .bind(key)
    .bind(sku)
    .execute(conn)
    .await
    .unwrap();
    Order {
        id: done.last_insert_id() as i64,
        sku: sku.into(),
    }
}
