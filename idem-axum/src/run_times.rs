//! How long each route's handler has recently taken, for the `Retry-After`
//! of a 409: a duplicate should come back when the first request is likely
//! done, not when its whole lease would run out.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

/// Routes tracked at most: a router without matched paths scopes by URI
/// path, which is unbounded.
const MAX_ROUTES: usize = 1024;

/// Weight of the newest run in the moving average.
const NEWEST_WEIGHT: f64 = 0.25;

/// The estimate for a route none of whose runs has ended here yet (the
/// first request after a start, or a route this process never ran).
/// Neither its usual run time nor how long the holder has run is known:
/// the store's answer carries only the holder's lease left, which is
/// renewed while it runs, so it says how long the holder *may* take (30 s
/// by default), not how long it will. A second is a short handler's
/// order of magnitude; a duplicate told it too early is told again, with
/// the route's run time once one has ended, at the cost of one small
/// request, where one told the lease waits it out whatever the run took.
pub(crate) const FIRST_ESTIMATE: Duration = Duration::from_secs(1);

/// A moving average of run times per route.
#[derive(Debug, Default)]
pub(crate) struct RunTimes(Mutex<HashMap<String, Duration>>);

impl RunTimes {
    /// Records one run of `route`'s handler.
    pub(crate) fn record(&self, route: &str, took: Duration) {
        let mut times = self
            .0
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        if let Some(average) = times.get_mut(route) {
            *average = average.mul_f64(1.0 - NEWEST_WEIGHT) + took.mul_f64(NEWEST_WEIGHT);
        } else if times.len() < MAX_ROUTES {
            times.insert(route.to_owned(), took);
        }
    }

    /// When a request of `route` that is running now will likely be done:
    /// its usual run time (the running one started at most that long
    /// ago), or [`FIRST_ESTIMATE`] before any has ended, never beyond
    /// `lease_left`, the latest the holder can hold it.
    pub(crate) fn estimate(&self, route: &str, lease_left: Duration) -> Duration {
        let times = self
            .0
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        let usual = times.get(route).copied().unwrap_or(FIRST_ESTIMATE);
        usual.min(lease_left)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn estimates_follow_recent_runs_within_the_lease() {
        let times = RunTimes::default();
        let lease = Duration::from_secs(30);
        assert_eq!(
            times.estimate("POST /a", lease),
            FIRST_ESTIMATE,
            "no history: the first estimate, not the lease"
        );
        assert_eq!(
            times.estimate("POST /a", Duration::from_millis(300)),
            Duration::from_millis(300),
            "the first estimate within the lease left"
        );
        times.record("POST /a", Duration::from_millis(200));
        assert_eq!(times.estimate("POST /a", lease), Duration::from_millis(200));
        times.record("POST /a", Duration::from_millis(600));
        assert_eq!(times.estimate("POST /a", lease), Duration::from_millis(300));
        assert_eq!(
            times.estimate("POST /a", Duration::from_millis(100)),
            Duration::from_millis(100)
        );
        assert_eq!(times.estimate("POST /b", lease), FIRST_ESTIMATE);
    }
}
