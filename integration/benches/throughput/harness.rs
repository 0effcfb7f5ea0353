//! A small measuring harness: calls per second, p50 and p99, in rounds.

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

pub const ROUNDS: usize = 7;

#[derive(Clone, Copy)]
pub struct Figures {
    pub per_sec: f64,
    pub p50: Duration,
    pub p99: Duration,
}

/// Runs `total` calls of `call(i)` with `concurrency` tasks; `i` is unique
/// across the whole run so fresh-key scenarios never repeat a key.
pub async fn measure<F, Fut>(concurrency: usize, total: u64, call: F) -> Figures
where
    F: Fn(u64) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = ()> + Send,
{
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let call = Arc::new(call);
    let start = Instant::now();
    let mut tasks = Vec::with_capacity(concurrency);
    for _ in 0..concurrency {
        let call = call.clone();
        let share = total / concurrency as u64;
        tasks.push(tokio::spawn(async move {
            let mut latencies = Vec::with_capacity(share as usize);
            for _ in 0..share {
                let i = NEXT.fetch_add(1, Ordering::Relaxed);
                let t = Instant::now();
                call(i).await;
                latencies.push(t.elapsed());
            }
            latencies
        }));
    }
    let mut all = Vec::with_capacity(total as usize);
    for task in tasks {
        all.extend(task.await.expect("bench task panicked"));
    }
    let elapsed = start.elapsed();
    all.sort_unstable();
    let at = |q: f64| all[((all.len() as f64 * q) as usize).min(all.len() - 1)];
    Figures {
        per_sec: all.len() as f64 / elapsed.as_secs_f64(),
        p50: at(0.50),
        p99: at(0.99),
    }
}

pub struct Row {
    pub scenario: String,
    pub subject: String,
    pub figures: Figures,
    /// The subject this row is compared against, by name, or none for the
    /// subject under test itself.
    pub baseline_of: Option<String>,
}

pub struct Report {
    filter: Option<String>,
    /// `IDEM_BENCH_SUBJECT`: run only the subjects whose name contains it.
    subject: Option<String>,
    /// `IDEM_BENCH_VERBOSE`: print every round.
    verbose: bool,
    rows: Vec<Row>,
    notes: Vec<String>,
}

impl Report {
    pub fn new(filter: Option<String>) -> Self {
        Self {
            filter,
            subject: std::env::var("IDEM_BENCH_SUBJECT").ok(),
            verbose: std::env::var_os("IDEM_BENCH_VERBOSE").is_some(),
            rows: Vec::new(),
            notes: Vec::new(),
        }
    }

    /// Whether any scenario of a group (named by `group`) may be wanted, to
    /// skip its set-up: a filter that names no group may match any.
    pub fn wants_any(&self, group: &str) -> bool {
        const GROUPS: [&str; 3] = ["redis", "postgres", "sqlite"];
        self.filter.as_deref().is_none_or(|f| {
            group.contains(f) || f.contains(group) || !GROUPS.iter().any(|g| f.contains(g))
        })
    }

    pub fn wants(&self, scenario: &str) -> bool {
        self.filter.as_deref().is_none_or(|f| scenario.contains(f))
    }

    /// Runs `subjects` (name, runner) interleaved for [`ROUNDS`] rounds,
    /// each round in a rotated order, and keeps each one's median round by
    /// throughput. The first subject is
    /// idem; the rest are its baselines.
    pub async fn scenario(&mut self, scenario: &str, subjects: Vec<(&str, Runner)>) {
        self.scenario_rounds(scenario, ROUNDS, subjects).await;
    }

    /// As [`scenario`](Self::scenario), for `rounds` rounds.
    pub async fn scenario_rounds(
        &mut self,
        scenario: &str,
        rounds_wanted: usize,
        subjects: Vec<(&str, Runner)>,
    ) {
        if !self.wants(scenario) {
            return;
        }
        eprintln!("bench: {scenario}");
        let idem = subjects[0].0.to_owned();
        let subjects: Vec<(&str, Runner)> = subjects
            .into_iter()
            .filter(|(name, _)| self.subject.as_deref().is_none_or(|s| name.contains(s)))
            .collect();
        if subjects.is_empty() {
            return;
        }
        let mut rounds: Vec<Vec<Figures>> = vec![Vec::new(); subjects.len()];
        for round in 0..rounds_wanted {
            // Each round starts with the next subject, so none always
            // follows the same one.
            let order = (0..subjects.len()).map(|k| (k + round) % subjects.len());
            for i in order {
                let (name, run) = &subjects[i];
                let figures = run().await;
                if self.verbose {
                    eprintln!(
                        "  {name}: {:.0}/s p50 {:.1} µs",
                        figures.per_sec,
                        figures.p50.as_secs_f64() * 1e6
                    );
                }
                rounds[i].push(figures);
            }
        }
        // Ratios only when the subject under test ran too.
        let idem = (subjects[0].0 == idem).then_some(idem);
        for (i, (name, _)) in subjects.iter().enumerate() {
            let runs = &mut rounds[i];
            runs.sort_by(|a, b| a.per_sec.total_cmp(&b.per_sec));
            self.rows.push(Row {
                scenario: scenario.to_owned(),
                subject: (*name).to_owned(),
                figures: runs[runs.len() / 2],
                baseline_of: idem.clone().filter(|idem| idem != name),
            });
        }
    }

    /// A line printed under the table (e.g. bytes per record).
    pub fn note(&mut self, note: String) {
        self.notes.push(note);
    }

    pub fn print(&self) {
        println!("| scenario | subject | calls/s | p50 | p99 | idem ÷ this |");
        println!("| --- | --- | ---: | ---: | ---: | ---: |");
        for row in &self.rows {
            let ratio = match &row.baseline_of {
                None => "—".to_owned(),
                Some(idem) => {
                    let base = self
                        .rows
                        .iter()
                        .find(|r| r.scenario == row.scenario && &r.subject == idem)
                        .expect("idem row");
                    format!("{:.2}×", base.figures.per_sec / row.figures.per_sec)
                }
            };
            println!(
                "| {} | {} | {:.0} | {:.1} µs | {:.1} µs | {} |",
                row.scenario,
                row.subject,
                row.figures.per_sec,
                row.figures.p50.as_secs_f64() * 1e6,
                row.figures.p99.as_secs_f64() * 1e6,
                ratio
            );
        }
        if !self.notes.is_empty() {
            println!();
        }
        for note in &self.notes {
            println!("- {note}");
        }
    }
}

pub type Runner = Box<dyn Fn() -> std::pin::Pin<Box<dyn Future<Output = Figures>>>>;

/// Boxes a closure that measures one round.
pub fn runner<F, Fut>(f: F) -> Runner
where
    F: Fn() -> Fut + 'static,
    Fut: Future<Output = Figures> + 'static,
{
    Box::new(move || Box::pin(f()))
}

/// A round of `calls` idem calls at `concurrency` on `idem`, each with key
/// `key_of(i)` and a no-op body.
pub fn idem_runner(
    idem: idem::Idempotency,
    scope: Arc<str>,
    concurrency: usize,
    calls: u64,
    key_of: fn(u64) -> u64,
) -> Runner {
    idem_runner_over(vec![idem], scope, concurrency, calls, key_of)
}

/// As [`idem_runner`], call `i` going to `handles[i % len]`.
pub fn idem_runner_over(
    handles: Vec<idem::Idempotency>,
    scope: Arc<str>,
    concurrency: usize,
    calls: u64,
    key_of: fn(u64) -> u64,
) -> Runner {
    let handles: Arc<[idem::Idempotency]> = handles.into();
    runner(move || {
        let (handles, scope) = (handles.clone(), scope.clone());
        measure(concurrency, calls, move |i| {
            let idem = handles[i as usize % handles.len()].clone();
            let scope = scope.clone();
            async move {
                let key = key_of(i);
                let out: Result<u64, idem::Error> = idem
                    .call(&*scope, &key)
                    .run(|| async move { Ok(key) })
                    .await;
                out.expect("idem call in the bench");
            }
        })
    })
}
