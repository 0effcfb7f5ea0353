//! The typed answers a statement is sent for (its row, its rows, or how
//! many rows it changed), for `crate::sql::send`.

use sqlx::postgres::{PgConnection, PgRow};

use crate::answer::{Affected, Answer, Sent};

use super::dialect::PgQuery;

/// The one row a statement answers.
impl<'q> Answer<PgConnection, PgQuery<'q>> for PgRow {
    fn read<'c>(query: PgQuery<'q>, on: &'c mut PgConnection) -> Sent<'c, Self>
    where
        PgQuery<'q>: 'c,
    {
        Box::pin(query.fetch_one(on))
    }
}

/// Every row a statement answers.
impl<'q> Answer<PgConnection, PgQuery<'q>> for Vec<PgRow> {
    fn read<'c>(query: PgQuery<'q>, on: &'c mut PgConnection) -> Sent<'c, Self>
    where
        PgQuery<'q>: 'c,
    {
        Box::pin(query.fetch_all(on))
    }
}

/// The row a statement answers, if any.
impl<'q> Answer<PgConnection, PgQuery<'q>> for Option<PgRow> {
    fn read<'c>(query: PgQuery<'q>, on: &'c mut PgConnection) -> Sent<'c, Self>
    where
        PgQuery<'q>: 'c,
    {
        Box::pin(query.fetch_optional(on))
    }
}

impl<'q> Answer<PgConnection, PgQuery<'q>> for Affected {
    fn read<'c>(query: PgQuery<'q>, on: &'c mut PgConnection) -> Sent<'c, Self>
    where
        PgQuery<'q>: 'c,
    {
        Box::pin(async move { Ok(Affected(query.execute(on).await?.rows_affected())) })
    }
}
