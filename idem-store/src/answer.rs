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
