//! Pauses that double between the sendings of a fenced step that failed,
//! for as long as a claim's lease may still hold it.

use std::time::Duration;

use tokio::time::Instant;

/// Doubling pauses, up to `last`, while one more pause ends before
/// `until`: past it, the lease the step was fenced by has run out.
pub(crate) struct Backoff {
    pause: Duration,
    last: Duration,
    until: Instant,
}

impl Backoff {
    pub(crate) fn new(first: Duration, last: Duration, until: Instant) -> Self {
        Backoff {
            pause: first,
            last,
            until,
        }
    }

    /// Sleeps the next pause and answers `true`, or answers `false` at
    /// once when that pause would end at or past `until`.
    pub(crate) async fn wait(&mut self) -> bool {
        if Instant::now() + self.pause >= self.until {
            return false;
        }
        tokio::time::sleep(self.pause).await;
        self.pause = self.pause.saturating_mul(2).min(self.last);
        true
    }
}
