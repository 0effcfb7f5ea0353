//! Every ```rust snippet of the README compiles as a user would paste it,
//! against the facade as a dependency (`idemkit`, used as `idem`). The
//! build script copies the snippets out of README.md; each module below
//! gives one snippet the context the README leaves implicit (the user's own
//! types, a handle in scope) and includes it verbatim. A snippet added to
//! the README without a module here fails `every_snippet_has_a_context`.

#![allow(dead_code, unused_imports, unused_variables, unreachable_code)]
#![allow(clippy::all)]

use serde::{Deserialize, Serialize};

macro_rules! snippet {
    ($n:literal) => {
        include!(concat!(env!("OUT_DIR"), "/readme_", $n, ".rs"));
    };
    (block $n:literal) => {
        include!(concat!(env!("OUT_DIR"), "/readme_", $n, "_block.rs"))
    };
}

/// The user's own types that the snippets name.
mod app {
    use super::*;

    #[derive(Serialize, Deserialize, Clone)]
    pub(crate) struct ChargeRequest {
        pub idempotency_key: String,
        pub tenant: u64,
        pub amount_cents: u64,
    }
    #[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
    pub(crate) struct Receipt {
        pub charge_id: u64,
    }
    #[derive(Debug)]
    pub(crate) enum AppError {
        Idem(idem::Error),
        Db(sqlx::Error),
    }
    impl From<idem::Error> for AppError {
        fn from(err: idem::Error) -> Self {
            AppError::Idem(err)
        }
    }
    impl From<sqlx::Error> for AppError {
        fn from(err: sqlx::Error) -> Self {
            AppError::Db(err)
        }
    }
    #[derive(Serialize, Deserialize, Clone, Debug)]
    pub(crate) struct Order {
        pub id: String,
        pub sku: String,
    }
    pub(crate) async fn charge_card(payload: &ChargeRequest) -> Result<Receipt, AppError> {
        Ok(Receipt {
            charge_id: payload.amount_cents,
        })
    }
}

mod s01 {
    use super::app::*;
    use idem::idempotent;
    snippet!(1);
}

mod s02 {
    snippet!(2);
    #[test]
    fn runs() {
        main().unwrap();
    }
}

mod s03 {
    use super::app::Order;
    use serde::{Deserialize, Serialize};
    #[derive(Serialize, Deserialize)]
    pub(crate) struct Shipment(String);
    pub(crate) struct Carrier;
    impl Carrier {
        async fn book(&self, order: &Order, key: &str) -> Result<Shipment, ShipError> {
            Ok(Shipment(format!("{}:{key}", order.id)))
        }
    }
    pub(crate) struct ShipError;
    impl From<idem::Error> for ShipError {
        fn from(_: idem::Error) -> Self {
            ShipError
        }
    }
    snippet!(3);
}

mod s04 {
    use std::time::Duration;
    async fn serve(
        listener: tokio::net::TcpListener,
        app: axum::Router,
        idem: idem::Idempotency,
    ) -> anyhow::Result<()> {
        snippet!(block 4);
        Ok(())
    }
}

mod s05 {
    use super::app::*;
    use idem::idempotent;
    use sqlx::PgPool;
    #[derive(Serialize, Deserialize)]
    pub(crate) struct Bill;
    use serde::{Deserialize, Serialize};
    snippet!(5);
}

mod s06 {
    use super::app::*;
    use std::time::Duration;
    async fn call(key: String, payload: ChargeRequest) {
        snippet!(block 6);
    }
}

mod s07 {
    async fn connect() -> Result<(), idem::StoreError> {
        snippet!(block 7);
        Ok(())
    }
}

mod s08 {
    async fn open() -> Result<(), idem::StoreError> {
        snippet!(block 8);
        Ok(())
    }
}

mod s09 {
    async fn connect() -> Result<(), idem::StoreError> {
        snippet!(block 9);
        Ok(())
    }
}

mod s10 {
    async fn connect(url: &str) -> Result<(), idem::StoreError> {
        snippet!(block 10);
        Ok(())
    }
}

mod s11 {
    fn purge(store: idem::PostgresStore) {
        snippet!(block 11);
    }
}

mod s12 {
    use super::app::AppError;
    #[derive(Serialize, Deserialize)]
    struct Order {
        id: i64,
        sku: String,
    }
    #[derive(Serialize, Deserialize)]
    struct NewOrder {
        order_id: String,
        sku: String,
    }
    use serde::{Deserialize, Serialize};
    async fn place(
        pool: sqlx::PgPool,
        store: idem::PostgresStore,
        idem: idem::Idempotency,
        req: NewOrder,
    ) -> Result<(), AppError> {
        snippet!(block 12);
        Ok(())
    }
}

mod s13 {
    #[derive(Clone)]
    struct User {
        id: u64,
    }
    async fn create_payment() {}
    fn router() {
        snippet!(block 13);
    }
}

mod s14 {
    use super::app::Receipt;
    use serde::{Deserialize, Serialize};
    #[derive(Clone)]
    pub(crate) struct User {
        id: u64,
    }
    #[derive(Serialize, Deserialize)]
    pub(crate) struct PaymentRequest {
        amount_cents: u64,
    }
    snippet!(14);
}

mod s15 {
    async fn send() -> Result<(), reqwest_middleware::Error> {
        snippet!(block 15);
        Ok(())
    }
}

mod s16 {
    async fn relay(client: reqwest_middleware::ClientWithMiddleware) {
        snippet!(block 16);
    }
}

mod s17 {
    #[derive(Serialize, Deserialize, Clone)]
    pub(crate) struct OrderPlaced {
        order_id: String,
        amount_cents: i64,
    }
    #[derive(Serialize, Deserialize)]
    pub(crate) struct Billed;
    impl Billed {
        fn of(_: &OrderPlaced) -> Self {
            Billed
        }
    }
    pub(crate) enum BillingError {
        Idem(idem::Error),
        Db(sqlx::Error),
    }
    impl From<idem::Error> for BillingError {
        fn from(err: idem::Error) -> Self {
            BillingError::Idem(err)
        }
    }
    impl AsIdemError for BillingError {
        fn as_idem_error(&self) -> Option<&idem::Error> {
            match self {
                BillingError::Idem(err) => Some(err),
                BillingError::Db(_) => None,
            }
        }
    }
    use serde::{Deserialize, Serialize};
    snippet!(17);

    mod s18 {
        use super::*;
        use async_nats::jetstream::AckKind;
        async fn handle(
            store: idem::PostgresStore,
            pool: sqlx::PgPool,
            msg: OrderPlaced,
            message: async_nats::jetstream::Message,
        ) -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
            snippet!(block 18);
            Ok(())
        }
    }
}

mod s19 {
    use super::app::{AppError, Order};
    #[derive(serde::Serialize, serde::Deserialize)]
    pub(crate) struct Reservation {
        pub parcels: Vec<String>,
    }
    #[derive(serde::Serialize, serde::Deserialize)]
    pub(crate) struct Placed {
        charge: String,
        labels: Vec<String>,
    }
    mod warehouse {
        pub(super) async fn reserve(
            _: &super::Order,
        ) -> Result<super::Reservation, super::AppError> {
            Ok(super::Reservation { parcels: vec![] })
        }
    }
    mod payments {
        pub(super) async fn charge(_: &super::Order, key: &str) -> Result<String, super::AppError> {
            Ok(key.to_owned())
        }
    }
    mod carrier {
        pub(super) async fn label(parcel: &String) -> Result<String, super::AppError> {
            Ok(parcel.clone())
        }
    }
    snippet!(19);
}

/// Snippets covered above; keep in step with the modules.
const COVERED: usize = 19;

#[test]
fn every_snippet_has_a_context() {
    let count: usize = include!(concat!(env!("OUT_DIR"), "/readme_count.rs"));
    assert_eq!(
        count, COVERED,
        "README.md has {count} rust snippets and tests/readme.rs covers {COVERED}: give the new one a module"
    );
}
