//! What a SQL store sends a statement for: a typed answer read from it
//! ([`Answer`]), on its own connections or a caller's pool.

use std::pin::Pin;

/// A statement on its way, boxed: a future in the trait itself would not
/// be provably `Send` inside `#[async_trait]` methods (rust-lang/rust#100013).
pub(crate) type Sent<'c, T> = Pin<Box<dyn Future<Output = Result<T, sqlx::Error>> + Send + 'c>>;

/// What a statement `Q` is sent for on a connection `C`, read from its
/// answer.
pub(crate) trait Answer<C, Q>: Sized + Send {
    /// Sends `query` on `on` and reads its answer.
    fn read<'c>(query: Q, on: &'c mut C) -> Sent<'c, Self>
    where
        Q: 'c;
}

/// How many rows a statement changed (MySQL: matched, as sqlx asks it for
/// found rows, so an update that writes the values a row already has
/// still counts).
pub(crate) struct Affected(pub u64);

impl Affected {
    /// A fenced operation's answer as its statement alone tells it: a row
    /// changed means the claim was ours.
    #[cfg(any(feature = "postgres", feature = "mysql"))]
    pub(crate) fn fence(&self) -> idem_contract::store::Fence {
        use idem_contract::store::Fence;
        if self.0 == 0 {
            Fence::Lost
        } else {
            Fence::Held
        }
    }
}

/// The answers of one driver's statements `$query<'q>` on `$conn`: its one
/// row `$row`, every row, the row if any, and how many rows changed.
macro_rules! answers {
    ($conn:ty, $query:ident, $row:ty) => {
        impl<'q> $crate::answer::Answer<$conn, $query<'q>> for $row {
            fn read<'c>(query: $query<'q>, on: &'c mut $conn) -> $crate::answer::Sent<'c, Self>
            where
                $query<'q>: 'c,
            {
                Box::pin(query.fetch_one(on))
            }
        }

        impl<'q> $crate::answer::Answer<$conn, $query<'q>> for Vec<$row> {
            fn read<'c>(query: $query<'q>, on: &'c mut $conn) -> $crate::answer::Sent<'c, Self>
            where
                $query<'q>: 'c,
            {
                Box::pin(query.fetch_all(on))
            }
        }

        impl<'q> $crate::answer::Answer<$conn, $query<'q>> for Option<$row> {
            fn read<'c>(query: $query<'q>, on: &'c mut $conn) -> $crate::answer::Sent<'c, Self>
            where
                $query<'q>: 'c,
            {
                Box::pin(query.fetch_optional(on))
            }
        }

        impl<'q> $crate::answer::Answer<$conn, $query<'q>> for $crate::answer::Affected {
            fn read<'c>(query: $query<'q>, on: &'c mut $conn) -> $crate::answer::Sent<'c, Self>
            where
                $query<'q>: 'c,
            {
                Box::pin(async move {
                    Ok($crate::answer::Affected(
                        query.execute(on).await?.rows_affected(),
                    ))
                })
            }
        }
    };
}
pub(crate) use answers;
