//! The server's clock as this store reads it, for the one place a value
//! holds a time that is read back: a completed record's expiry (see
//! `value.rs`), from which a replay reads the record's lifetime without a
//! `PTTL`.
//!
//! Why the server's clock and not this host's: two hosts' wall clocks may
//! disagree by seconds, and an expiry written by one and read by the other
//! would be off by that much. Each store instead reads the server's `TIME`
//! (on connect and after a failed connection, with the other checks of
//! `conn.rs`) and counts on from it by its monotonic clock, which no wall
//! clock step moves. An expiry written so and read so is off by the two
//! readings' errors (half a round trip each, on a loopback well under a
//! millisecond) and the monotonic clocks' drift since (NTP slews at most
//! 500 ppm: 43 s over a day); the lifetime read is therefore cut by a
//! thirty-second of itself (`value::lifetime_left`), which covers 3%.
//!
//! What rests on it: only how long a local cache keeps a replayed record.
//! Redis's own `PX` still expires every key, leases are judged by Redis's
//! clock (`PTTL` in the scripts), and no claim is decided by this clock.
//! A server that refuses `TIME` leaves this host's wall clock in its place.

use std::sync::atomic::{AtomicI64, Ordering};
use std::time::{Duration, Instant};

/// The server's Unix time, read once and counted on by `Instant`.
pub(super) struct ServerClock {
    /// The instant the offset counts from.
    epoch: Instant,
    /// The server's Unix time, in milliseconds, at `epoch`.
    at_epoch_ms: AtomicI64,
}

impl Default for ServerClock {
    /// This host's wall clock, until the server's is read.
    fn default() -> Self {
        let now = super::value::unix_now();
        ServerClock {
            epoch: Instant::now(),
            at_epoch_ms: AtomicI64::new(i64::try_from(now.as_millis()).unwrap_or(0)),
        }
    }
}

impl ServerClock {
    /// The server's Unix time now, as last read (zero before the epoch).
    pub(super) fn now(&self) -> Duration {
        let at_epoch = self.at_epoch_ms.load(Ordering::Relaxed);
        let since = i64::try_from(self.epoch.elapsed().as_millis()).unwrap_or(i64::MAX);
        Duration::from_millis(u64::try_from(at_epoch.saturating_add(since)).unwrap_or(0))
    }

    /// The server answered `TIME` with `server` (its Unix time) to a
    /// command sent at `sent` and answered at `answered`: taken as its time
    /// halfway between.
    pub(super) fn read(&self, server: Duration, sent: Instant, answered: Instant) {
        let midway = sent + answered.saturating_duration_since(sent) / 2;
        let since = midway.saturating_duration_since(self.epoch).as_millis();
        let server = i64::try_from(server.as_millis()).unwrap_or(i64::MAX);
        let since = i64::try_from(since).unwrap_or(i64::MAX);
        self.at_epoch_ms
            .store(server.saturating_sub(since), Ordering::Relaxed);
    }
}

/// A `TIME` answer (seconds, microseconds, as digits) as a Unix time.
pub(super) fn of_time(answer: &(String, String)) -> Option<Duration> {
    let seconds: u64 = answer.0.parse().ok()?;
    let micros: u64 = answer.1.parse().ok()?;
    Some(Duration::from_secs(seconds) + Duration::from_micros(micros))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_server_time_is_counted_on_from_its_reading() {
        let clock = ServerClock::default();
        let sent = Instant::now();
        let answered = sent + Duration::from_millis(10);
        // A server 50 s behind this host.
        let server = super::super::value::unix_now() - Duration::from_secs(50);
        clock.read(server, sent, answered);
        let behind = super::super::value::unix_now().saturating_sub(clock.now());
        assert!(behind > Duration::from_secs(49), "{behind:?}");
        assert!(behind < Duration::from_secs(51), "{behind:?}");
    }

    #[test]
    fn a_time_answer_reads_as_seconds_and_micros() {
        let answer = ("1700000000".to_owned(), "250000".to_owned());
        assert_eq!(
            of_time(&answer),
            Some(Duration::from_millis(1_700_000_000_250))
        );
        assert_eq!(of_time(&("x".to_owned(), "1".to_owned())), None);
    }
}
