//! The cleanup of a claim whose answer was lost: it lapses by its token
//! in the background, once the store answers again.

use std::sync::Arc;
use std::time::Duration;

use crate::backoff::Backoff;
use crate::{Fence, RecordKey, Store, Token};

/// A claim whose answer never came (a timeout, a dropped connection) may
/// still have been applied: the key would then answer `InProgress` for the
/// whole lease with no holder. Ends it by its token once the store answers
/// again, in the background, with backoff, for at most the lease (after
/// which it has lapsed anyway). It is not released but lapses (a renewal
/// to zero): the claim may have been a takeover of a vanished holder's, the
/// evidence that the holder may have had its effect, and a released key
/// would be claimed fresh, without a reconcile. The next call takes the
/// lapsed claim over instead. Harmless if it never landed: the renewal is
/// fenced by the token.
pub(crate) fn lapse_if_applied(
    store: &Arc<dyn Store>,
    key: RecordKey,
    token: Token,
    lease: Duration,
) {
    let store = Arc::clone(store);
    tokio::spawn(async move {
        let until = tokio::time::Instant::now() + lease;
        let mut backoff = Backoff::new(Duration::from_millis(250), Duration::MAX, until);
        while backoff.wait().await {
            match store.renew(&key, token, Duration::ZERO).await {
                Ok(Fence::Held) => {
                    tracing::info!(key = %key.short(), "idem: a claim that had timed out was applied after all; it lapses for the next call");
                    return;
                }
                Ok(_) => return,
                Err(_) => {}
            }
        }
    });
}
