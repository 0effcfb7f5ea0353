//! The typed answers a statement is sent for (its rows, its first row, or
//! how many rows it matched: sqlx asks MySQL for found rows), for
//! `crate::sql::send`.

use sqlx::mysql::{MySqlConnection, MySqlRow};

use super::MyQuery;

crate::answer::answers!(MySqlConnection, MyQuery, MySqlRow);
