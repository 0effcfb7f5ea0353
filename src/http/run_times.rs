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
    /// ago), never beyond `lease_left`, the latest the holder can hold it.
    pub(crate) fn estimate(&self, route: &str, lease_left: Duration) -> Duration {
        let times = self
            .0
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        times
            .get(route)
            .map_or(lease_left, |average| (*average).min(lease_left))
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
            lease,
            "no history: the lease"
        );
        times.record("POST /a", Duration::from_millis(200));
        assert_eq!(times.estimate("POST /a", lease), Duration::from_millis(200));
        times.record("POST /a", Duration::from_millis(600));
        assert_eq!(times.estimate("POST /a", lease), Duration::from_millis(300));
        assert_eq!(
            times.estimate("POST /a", Duration::from_millis(100)),
            Duration::from_millis(100)
        );
        assert_eq!(times.estimate("POST /b", lease), lease);
    }
}
