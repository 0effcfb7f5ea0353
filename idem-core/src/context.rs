//! The running call, for [`child_key`] and [`step`](crate::step).

use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;

use crate::key::ScopeText;
use crate::{Fingerprint, RecordKey, StepId, Store, Token};

tokio::task_local! {
    static CURRENT: CallContext;
}

/// What a running body's task knows of its call.
pub(crate) struct CallContext {
    pub key: RecordKey,
    /// Why steps are refused in this call, when they are: a borrowed store
    /// (`Call::on`), which the body cannot reach, or one that does not
    /// record steps.
    pub steps: Result<StepCall, &'static str>,
}

/// What [`step`](crate::step) needs to replay and save steps.
pub(crate) struct StepCall {
    pub store: Arc<dyn Store>,
    pub token: Token,
    pub scope: ScopeText,
    pub ttl: Duration,
    pub limit: usize,
    pub version: u32,
    pub fingerprint: Fingerprint,
    /// The steps an earlier attempt finished, as the claim returned them.
    pub finished: Vec<(StepId, Bytes)>,
    /// The steps this attempt has reached, so a name used twice is refused.
    pub seen: Mutex<Vec<StepId>>,
}

/// `body` with `running` as its call: the task-local's own future, no
/// async layer around it (which would hold `running` and `body` twice).
pub(crate) fn scoped<F: Future>(running: CallContext, body: F) -> impl Future<Output = F::Output> {
    CURRENT.scope(running, body)
}

/// Runs `f` on the running call, or returns `None` outside one.
pub(crate) fn with_running<R>(f: impl FnOnce(&CallContext) -> R) -> Option<R> {
    CURRENT.try_with(f).ok()
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
    CURRENT.try_with(|running| running.key.child(name)).ok()
}
