//! What the SQL stores (PostgreSQL, MySQL) share beyond their connections
//! (`crate::conns`): reading the rows of their admin queries, and what
//! `check_schema` says.

pub(crate) mod admin;
pub(crate) mod schema;
pub(crate) mod send;
