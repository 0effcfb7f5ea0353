//! The running call, for [`child_key`].

use crate::RecordKey;

tokio::task_local! {
    static CURRENT: RecordKey;
}

pub(crate) async fn scoped<F: Future>(key: RecordKey, body: F) -> F::Output {
    CURRENT.scope(key, body).await
}

/// A key for a downstream call, derived from the running idempotent call's
/// scope and key and from `name`: a retried call sends the downstream
/// service the same key again. `None` outside an idempotent body.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")] async fn main() {
/// # let idem = idem::Idempotency::new(idem::MemoryStore::new());
/// let key: Result<Option<String>, idem::Error> = idem
///     .call("payments", "order-1")
///     .run(|| async { Ok(idem::child_key("gateway")) })
///     .await;
/// assert_eq!(key.unwrap().unwrap().len(), 64);
/// assert_eq!(idem::child_key("gateway"), None);
/// # }
/// ```
pub fn child_key(name: &str) -> Option<String> {
    CURRENT.try_with(|key| key.child(name)).ok()
}
