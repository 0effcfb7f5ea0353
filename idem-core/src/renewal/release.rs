//! The cleanup of a claim whose answer was lost: released by its token in
//! the background, once the store answers again.

use std::sync::Arc;
use std::time::Duration;

use crate::{Fence, RecordKey, Store, Token};

/// A claim whose answer never came (a timeout, a dropped connection) may
/// still have been applied: the key would then answer `InProgress` for the
/// whole lease with no holder. Releases it by its token once the store
/// answers again, in the background, with backoff, for at most the lease
/// (after which it has expired anyway). Harmless if it never landed: the
/// release is fenced by the token.
pub(crate) fn release_if_applied(
    store: &Arc<dyn Store>,
    key: RecordKey,
    token: Token,
    lease: Duration,
) {
    let store = Arc::clone(store);
    tokio::spawn(async move {
        let started = tokio::time::Instant::now();
        let mut wait = Duration::from_millis(250);
        while started.elapsed() + wait < lease {
            tokio::time::sleep(wait).await;
            match store.release(&key, token).await {
                Ok(Fence::Held) => {
                    tracing::info!(key = %key.short(), "idem: a claim that had timed out was applied after all; released");
                    return;
                }
                Ok(_) => return,
                Err(_) => wait *= 2,
            }
        }
    });
}
