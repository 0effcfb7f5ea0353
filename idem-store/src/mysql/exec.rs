//! The typed answers a statement is sent for (its rows, its first row, or
//! how many rows it matched), for `crate::sql::send`.

use sqlx::mysql::{MySqlConnection, MySqlRow};

use crate::answer::{Affected, Answer, Sent};

use super::MyQuery;

/// Every row a statement (or the claim procedure) answers.
impl<'q> Answer<MySqlConnection, MyQuery<'q>> for Vec<MySqlRow> {
    fn read<'c>(query: MyQuery<'q>, on: &'c mut MySqlConnection) -> Sent<'c, Self>
    where
        MyQuery<'q>: 'c,
    {
        Box::pin(query.fetch_all(on))
    }
}

/// The first row a plain `SELECT` answers, if any.
impl<'q> Answer<MySqlConnection, MyQuery<'q>> for Option<MySqlRow> {
    fn read<'c>(query: MyQuery<'q>, on: &'c mut MySqlConnection) -> Sent<'c, Self>
    where
        MyQuery<'q>: 'c,
    {
        Box::pin(query.fetch_optional(on))
    }
}

impl<'q> Answer<MySqlConnection, MyQuery<'q>> for Affected {
    fn read<'c>(query: MyQuery<'q>, on: &'c mut MySqlConnection) -> Sent<'c, Self>
    where
        MyQuery<'q>: 'c,
    {
        Box::pin(async move { Ok(Affected(query.execute(on).await?.rows_affected())) })
    }
}
