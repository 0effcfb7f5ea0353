//! Server time per subject: a server's own counters (Redis's `INFO
//! commandstats`, MySQL's `performance_schema`) read before and after each
//! subject's timed calls. Nothing is reset, so a shared server's
//! statistics stay as they were; the bench runs alone, so the difference
//! is the subject's own commands.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use crate::harness::{Report, Runner, runner};

/// Per command (or statement kind): how many ran, and their microseconds.
pub(crate) type Counts = BTreeMap<String, (u64, f64)>;

/// A server's counters.
pub(crate) trait Counters: 'static {
    /// What the note says they come from, and how to read them.
    const SOURCE: &'static str;
    fn read(&self) -> impl Future<Output = Counts>;
    /// Whether `what` runs inside another command, whose time holds it.
    fn nested(_what: &str) -> bool {
        false
    }
}

/// What the server counted during each subject's timed calls.
pub(crate) struct ServerTime<C> {
    counters: C,
    /// Per subject: its timed calls, and the server's counts over them.
    subjects: Mutex<Vec<(&'static str, u64, Counts)>>,
}

impl<C: Counters> ServerTime<C> {
    pub(crate) fn new(counters: C) -> Arc<Self> {
        Arc::new(ServerTime {
            counters,
            subjects: Mutex::new(Vec::new()),
        })
    }

    /// Runs `timed` (`calls` calls of `subject`) and adds what the server
    /// counted meanwhile to `subject`'s.
    pub(crate) async fn over<T>(
        &self,
        subject: &'static str,
        calls: u64,
        timed: impl Future<Output = T>,
    ) -> T {
        let before = self.counters.read().await;
        let out = timed.await;
        let after = self.counters.read().await;
        let mut subjects = self.subjects.lock().unwrap();
        let at = subjects.iter().position(|(name, ..)| *name == subject);
        let at = at.unwrap_or_else(|| {
            subjects.push((subject, 0, Counts::new()));
            subjects.len() - 1
        });
        let (_, total, counts) = &mut subjects[at];
        *total += calls;
        for (what, (n, us)) in after {
            let (n_before, us_before) = before.get(&what).copied().unwrap_or_default();
            // Fewer than one in a hundred calls: the reads of the counters.
            if n.saturating_sub(n_before) * 100 >= calls {
                let sum = counts.entry(what).or_default();
                sum.0 += n - n_before;
                sum.1 += us - us_before;
            }
        }
        out
    }

    /// Notes what the subjects of `scenario` (on `report`'s runtime) cost
    /// the server, if any ran: per subject, each command's count per call
    /// and mean server time, and the server's microseconds per call.
    pub(crate) fn report_to(&self, report: &mut Report, scenario: &str) {
        let subjects = std::mem::take(&mut *self.subjects.lock().unwrap());
        if subjects.is_empty() {
            return;
        }
        let line = |(subject, calls, counts): (&str, u64, Counts)| {
            let calls = calls.max(1) as f64;
            let all: f64 = counts
                .iter()
                .filter(|(what, _)| !C::nested(what))
                .map(|(_, (_, us))| us)
                .sum();
            let each: Vec<String> = counts
                .iter()
                .map(|(what, (n, us))| {
                    let per_call = *n as f64 / calls;
                    let inside = if C::nested(what) { "inside: " } else { "" };
                    format!(
                        "{inside}{per_call:.2} × `{what}` at {:.2} µs",
                        us / *n as f64
                    )
                })
                .collect();
            format!(
                "{subject}: {:.2} µs a call ({})",
                all / calls,
                each.join(", ")
            )
        };
        let lines: Vec<String> = subjects.into_iter().map(line).collect();
        report.note(format!(
            "{scenario} ({}), server time per call by {}: {}",
            report.runtime(),
            C::SOURCE,
            lines.join("; ")
        ));
    }
}

/// A subject named once: `make` builds its runner, which times the server
/// under the same name the report shows.
pub(crate) fn subject(
    name: &'static str,
    make: impl FnOnce(&'static str) -> Runner,
) -> (&'static str, Runner) {
    (name, make(name))
}

/// `subjects`, each round's server time added to its subject's.
pub(crate) fn on_server<C: Counters>(
    time: &Arc<ServerTime<C>>,
    calls: u64,
    subjects: Vec<(&'static str, Runner)>,
) -> Vec<(&'static str, Runner)> {
    let timed = |(subject, round): (&'static str, Runner)| {
        let time = time.clone();
        let timed = runner(move || {
            let (round, time) = (round(), time.clone());
            async move { time.over(subject, calls, round).await }
        });
        (subject, timed)
    };
    subjects.into_iter().map(timed).collect()
}
