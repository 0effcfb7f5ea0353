//! The typed answers a statement is sent for (its row, its rows, or how
//! many rows it changed), for `crate::sql::send`.

use sqlx::postgres::{PgConnection, PgRow};

use super::dialect::PgQuery;

crate::answer::answers!(PgConnection, PgQuery, PgRow);
