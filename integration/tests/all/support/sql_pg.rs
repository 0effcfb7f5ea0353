//! The SQL cases' server on PostgreSQL: a place is a schema of its own.

use idem::{PostgresStore, StoreError};
use sqlx::postgres::PgConnection;
use sqlx::{Connection, Postgres};

use super::pg_server;
use crate::support::sql::race::RaceServer;
use crate::support::sql::tx::{
    Order, TxServer, handle_inserting_an_order, place_in_inserting_an_order,
};
use crate::support::sql::{SqlServer, alike_on_every_server};

/// PostgreSQL, as `pg_server` finds it.
pub(crate) struct Pg;

/// A connection of the test's own.
pub(crate) async fn admin() -> PgConnection {
    PgConnection::connect(&pg_server::url().await)
        .await
        .expect("admin connection")
}

impl SqlServer for Pg {
    type Store = PostgresStore;
    type Db = Postgres;
    const NAME: &'static str = "PostgresStore";
    const SITE: &'static str = "postgres-test";
    const MIGRATIONS: i32 = 4;

    async fn url() -> String {
        pg_server::url().await
    }

    fn unique(test: &str) -> String {
        pg_server::unique_schema(test)
    }

    async fn drop_stale() {
        pg_server::drop_stale_schemas(&pg_server::url().await).await;
    }

    alike_on_every_server!(PostgresStore, place => PostgresStore::builder().schema(place));

    async fn connect_table(table: &str) -> Result<PostgresStore, StoreError> {
        let url = pg_server::url().await;
        PostgresStore::builder().table(table).connect(&url).await
    }

    async fn record_version(migrations: &str, version: i32) {
        Self::execute(&format!(
            "INSERT INTO {migrations} (version) VALUES ({version})"
        ))
        .await;
    }

    async fn execute(sql: &str) {
        sqlx::raw_sql(sql)
            .execute(&mut admin().await)
            .await
            .unwrap();
    }

    async fn count(from: &str) -> i64 {
        sqlx::query_scalar(&format!("SELECT count(*) FROM {from}"))
            .fetch_one(&mut admin().await)
            .await
            .unwrap()
    }

    async fn versions(migrations: &str) -> Vec<i32> {
        sqlx::query_scalar(&format!(
            "SELECT version FROM {migrations} ORDER BY version"
        ))
        .fetch_all(&mut admin().await)
        .await
        .unwrap()
    }
}

impl RaceServer for Pg {
    const URL_VAR: &'static str = "IDEM_TEST_DATABASE_URL";
    type Conn = PgConnection;

    fn runs_table(place: &str) -> String {
        format!("\"{place}\".runs")
    }

    async fn create_runs(runs: &str) {
        Self::execute(&format!(
            "CREATE TABLE {runs} (key int PRIMARY KEY, n int NOT NULL)"
        ))
        .await;
    }

    async fn connect() -> PgConnection {
        admin().await
    }

    async fn bump(conn: &mut PgConnection, runs: &str, key: u32) -> Result<(), sqlx::Error> {
        let bump = format!(
            "INSERT INTO {runs} (key, n) VALUES ($1, 1) \
             ON CONFLICT (key) DO UPDATE SET n = runs.n + 1"
        );
        sqlx::query(&bump).bind(key as i32).execute(conn).await?;
        Ok(())
    }

    async fn totals(runs: &str) -> (i64, i64, i64) {
        let (rows, total, max): (i64, i64, i32) = sqlx::query_as(&format!(
            "SELECT count(*), coalesce(sum(n), 0), coalesce(max(n), 0) FROM {runs}"
        ))
        .fetch_one(&mut admin().await)
        .await
        .unwrap();
        (rows, total, max.into())
    }
}

impl TxServer for Pg {
    fn orders_table(place: &str) -> String {
        format!("\"{place}\".orders")
    }

    fn create_orders(orders: &str) -> String {
        format!(
            "CREATE TABLE {orders} (id bigserial PRIMARY KEY, order_key text NOT NULL, sku text NOT NULL)"
        )
    }

    place_in_inserting_an_order!(PgConnection);

    handle_inserting_an_order!(idem::postgres::TxHandle);
}

/// Inserts the order `key` of `sku` into `orders` on `conn`.
pub(crate) async fn insert_order(
    conn: &mut PgConnection,
    orders: &str,
    key: &str,
    sku: &str,
) -> Order {
    let id: i64 = sqlx::query_scalar(&format!(
        "INSERT INTO {orders} (order_key, sku) VALUES ($1, $2) RETURNING id"
    ))
    .bind(key)
    .bind(sku)
    .fetch_one(conn)
    .await
    .unwrap();
    Order {
        id,
        sku: sku.into(),
    }
}
