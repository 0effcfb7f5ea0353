//! How long to wait between attempts: exponential backoff with jitter, or
//! the server's `Retry-After` (capped) with a little jitter of its own.

use std::time::Duration;

/// The backoff's settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Backoff {
    /// The ceiling of the first wait; each retry doubles it.
    pub(crate) first: Duration,
    /// The largest ceiling.
    pub(crate) max: Duration,
}

impl Backoff {
    /// The wait before retry number `retry` (0 for the first retry): a
    /// random point in the upper half of `first · 2^retry` (at most
    /// `max`), so clients that failed together do not retry together and
    /// no wait is near zero.
    pub(crate) fn delay(&self, retry: u32) -> Duration {
        let ceiling = self
            .first
            .saturating_mul(2u32.saturating_pow(retry))
            .min(self.max);
        ceiling / 2 + jitter(ceiling / 2)
    }

    /// The wait a `Retry-After` asked for, at most `cap`, plus up to one
    /// first backoff of jitter: every client told "1 s" does not come back
    /// in the same millisecond.
    pub(crate) fn after(&self, asked: Duration, cap: Duration) -> Duration {
        asked.min(cap).saturating_add(jitter(self.first))
    }
}

/// A random duration in `[0, up_to]`. Through `f64` a duration near
/// `Duration::MAX` can round past it, where `mul_f64` would panic.
fn jitter(up_to: Duration) -> Duration {
    Duration::try_from_secs_f64(up_to.as_secs_f64() * rand::random::<f64>())
        .map_or(up_to, |jitter| jitter.min(up_to))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn delays_double_within_their_jitter_up_to_the_max() {
        let backoff = Backoff {
            first: Duration::from_millis(100),
            max: Duration::from_secs(1),
        };
        for _ in 0..200 {
            let first = backoff.delay(0);
            assert!((Duration::from_millis(50)..=Duration::from_millis(100)).contains(&first));
            let third = backoff.delay(2);
            assert!((Duration::from_millis(200)..=Duration::from_millis(400)).contains(&third));
            let late = backoff.delay(40);
            assert!((Duration::from_millis(500)..=Duration::from_secs(1)).contains(&late));
            let told = backoff.after(Duration::from_secs(60), Duration::from_secs(5));
            assert!((Duration::from_secs(5)..=Duration::from_millis(5100)).contains(&told));
        }
    }

    /// A `Retry-After` of u64::MAX seconds under no cap, or settings at
    /// `Duration::MAX`, saturate instead of panicking.
    #[test]
    fn the_longest_waits_saturate() {
        let backoff = Backoff {
            first: Duration::from_millis(100),
            max: Duration::MAX,
        };
        let asked = Duration::from_secs(u64::MAX);
        assert!(backoff.after(asked, Duration::MAX) >= asked);
        assert_eq!(backoff.after(Duration::MAX, Duration::MAX), Duration::MAX);
        let huge = Backoff {
            first: Duration::MAX,
            max: Duration::MAX,
        };
        for _ in 0..200 {
            assert!(huge.delay(70) >= Duration::MAX / 2);
            assert!(huge.after(Duration::ZERO, Duration::MAX) <= Duration::MAX);
        }
    }
}
