//! A small measuring harness: calls per second, p50 and p99, in rounds.

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

pub(crate) const ROUNDS: usize = 7;

/// A runtime the scenarios run on.
#[derive(Clone, Copy)]
pub(crate) enum Flavor {
    CurrentThread,
    MultiThread(usize),
}

impl Flavor {
    /// The runtimes `IDEM_BENCH_RUNTIMES` asks for (`current`, `multi`, or
    /// both, the default), the multi-thread one with `IDEM_BENCH_WORKERS`
    /// workers (default 2).
    pub(crate) fn wanted() -> Vec<Flavor> {
        let which = std::env::var("IDEM_BENCH_RUNTIMES").unwrap_or_default();
        let workers = std::env::var("IDEM_BENCH_WORKERS")
            .ok()
            .and_then(|w| w.parse().ok())
            .unwrap_or(2);
        let all = which.is_empty();
        let mut flavors = Vec::new();
        if all || which.contains("current") {
            flavors.push(Flavor::CurrentThread);
        }
        if all || which.contains("multi") {
            flavors.push(Flavor::MultiThread(workers));
        }
        flavors
    }

    pub(crate) fn label(self) -> String {
        match self {
            Flavor::CurrentThread => "current-thread".to_owned(),
            Flavor::MultiThread(workers) => format!("multi-thread ({workers})"),
        }
    }

    pub(crate) fn runtime(self) -> tokio::runtime::Runtime {
        let mut builder = match self {
            Flavor::CurrentThread => tokio::runtime::Builder::new_current_thread(),
            Flavor::MultiThread(workers) => {
                let mut builder = tokio::runtime::Builder::new_multi_thread();
                builder.worker_threads(workers);
                builder
            }
        };
        builder.enable_all().build().expect("tokio runtime")
    }
}

#[derive(Clone, Copy)]
pub(crate) struct Figures {
    pub per_sec: f64,
    pub p50: Duration,
    pub p99: Duration,
}

/// Runs `total` calls of `call(i)` with `concurrency` tasks; `i` is unique
/// across the whole run so fresh-key scenarios never repeat a key.
pub(crate) async fn measure<F, Fut>(concurrency: usize, total: u64, call: F) -> Figures
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

pub(crate) struct Row {
    pub runtime: String,
    pub scenario: String,
    pub subject: String,
    pub figures: Figures,
    /// Calls per second in each round, in the order the rounds ran.
    pub rounds: Vec<f64>,
    /// The subject this row is compared against, by name, or none for the
    /// subject under test itself.
    pub baseline_of: Option<String>,
}

pub(crate) struct Report {
    filter: Option<String>,
    /// The runtime the scenarios now running run on.
    runtime: String,
    /// `IDEM_BENCH_SUBJECT`: run only the subjects whose name contains it
    /// (or, after a leading `=`, is it).
    subject: Option<String>,
    /// `IDEM_BENCH_VERBOSE`: print every round.
    verbose: bool,
    rows: Vec<Row>,
    notes: Vec<String>,
}

impl Report {
    pub(crate) fn new(filter: Option<String>) -> Self {
        Self {
            filter,
            runtime: String::new(),
            subject: std::env::var("IDEM_BENCH_SUBJECT").ok(),
            verbose: std::env::var_os("IDEM_BENCH_VERBOSE").is_some(),
            rows: Vec::new(),
            notes: Vec::new(),
        }
    }

    /// Labels the rows of the scenarios run from now on.
    pub(crate) fn set_runtime(&mut self, runtime: String) {
        self.runtime = runtime;
    }

    /// The runtime the scenarios now running run on.
    pub(crate) fn runtime(&self) -> &str {
        &self.runtime
    }

    /// Whether any scenario of a group (named by `group`) may be wanted, to
    /// skip its set-up: a filter that names no group may match any.
    pub(crate) fn wants_any(&self, group: &str) -> bool {
        const GROUPS: [&str; 4] = ["redis", "postgres", "sqlite", "mysql"];
        self.filter.as_deref().is_none_or(|f| {
            group.contains(f) || f.contains(group) || !GROUPS.iter().any(|g| f.contains(g))
        })
    }

    pub(crate) fn wants(&self, scenario: &str) -> bool {
        self.filter.as_deref().is_none_or(|f| scenario.contains(f))
    }

    /// Runs `subjects` (name, runner) interleaved for [`ROUNDS`] rounds,
    /// each round in a rotated order, and keeps each one's rounds and its
    /// median round by throughput. The first subject is idem; the rest are
    /// its baselines, compared round by round (see `ratio`).
    /// `IDEM_BENCH_ROUNDS` sets another number of rounds.
    pub(crate) async fn scenario(&mut self, scenario: &str, subjects: Vec<(&str, Runner)>) {
        let rounds = std::env::var("IDEM_BENCH_ROUNDS")
            .ok()
            .and_then(|r| r.parse().ok());
        self.scenario_rounds(scenario, rounds.unwrap_or(ROUNDS), subjects)
            .await;
    }

    /// As [`scenario`](Self::scenario), for `rounds` rounds.
    pub(crate) async fn scenario_rounds(
        &mut self,
        scenario: &str,
        rounds_wanted: usize,
        subjects: Vec<(&str, Runner)>,
    ) {
        if !self.wants(scenario) {
            return;
        }
        eprintln!("bench: {scenario} ({})", self.runtime);
        let idem = subjects[0].0.to_owned();
        let subjects: Vec<(&str, Runner)> = subjects
            .into_iter()
            .filter(|(name, _)| {
                self.subject
                    .as_deref()
                    .is_none_or(|s| subject_matches(name, s))
            })
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
            let in_order = runs.iter().map(|figures| figures.per_sec).collect();
            runs.sort_by(|a, b| a.per_sec.total_cmp(&b.per_sec));
            self.rows.push(Row {
                runtime: self.runtime.clone(),
                scenario: scenario.to_owned(),
                subject: (*name).to_owned(),
                figures: runs[runs.len() / 2],
                rounds: in_order,
                baseline_of: idem.clone().filter(|idem| idem != name),
            });
        }
    }

    /// A line printed under the table (e.g. bytes per record).
    /// The same note from a second runtime is kept once.
    pub(crate) fn note(&mut self, note: String) {
        if !self.notes.contains(&note) {
            self.notes.push(note);
        }
    }

    /// The ratio of idem's throughput to `row`'s, when `row` is a baseline:
    /// the median of the rounds' ratios, each of idem's round to the
    /// baseline's in the same round. Paired so, a drift that moves a whole
    /// round (the table growing, a checkpoint, the other core busy) moves
    /// both sides of its ratio, not one median more than the other.
    fn ratio(&self, row: &Row) -> Option<f64> {
        let idem = row.baseline_of.as_ref()?;
        let idem = self
            .rows
            .iter()
            .find(|r| r.runtime == row.runtime && r.scenario == row.scenario && &r.subject == idem)
            .expect("idem row");
        let mut ratios: Vec<f64> = idem
            .rounds
            .iter()
            .zip(&row.rounds)
            .map(|(idem, base)| idem / base)
            .collect();
        ratios.sort_by(f64::total_cmp);
        Some(ratios[ratios.len() / 2])
    }

    pub(crate) fn print(&self) {
        self.print_ratios();
        println!("| runtime | scenario | subject | calls/s | p50 | p99 | idem ÷ this |");
        println!("| --- | --- | --- | ---: | ---: | ---: | ---: |");
        for row in &self.rows {
            let ratio = self
                .ratio(row)
                .map_or_else(|| "—".to_owned(), |r| format!("{r:.2}×"));
            println!(
                "| {} | {} | {} | {:.0} | {:.1} µs | {:.1} µs | {} |",
                row.runtime,
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

    /// idem ÷ each baseline, one column per runtime, side by side.
    fn print_ratios(&self) {
        let mut runtimes: Vec<&str> = Vec::new();
        for row in &self.rows {
            if !runtimes.contains(&row.runtime.as_str()) {
                runtimes.push(&row.runtime);
            }
        }
        let mut pairs: Vec<(&str, &str)> = Vec::new();
        for row in self.rows.iter().filter(|row| row.baseline_of.is_some()) {
            if !pairs.contains(&(&row.scenario, &row.subject)) {
                pairs.push((&row.scenario, &row.subject));
            }
        }
        if pairs.is_empty() {
            return;
        }
        println!("| scenario | idem ÷ this | {} |", runtimes.join(" | "));
        println!("| --- | --- |{}", " ---: |".repeat(runtimes.len()));
        for (scenario, subject) in pairs {
            let cells: Vec<String> = runtimes
                .iter()
                .map(|runtime| {
                    self.rows
                        .iter()
                        .find(|r| {
                            r.runtime == *runtime && r.scenario == scenario && r.subject == subject
                        })
                        .and_then(|row| self.ratio(row))
                        .map_or_else(|| "—".to_owned(), |r| format!("{r:.2}×"))
                })
                .collect();
            println!("| {scenario} | {subject} | {} |", cells.join(" | "));
        }
        println!();
    }
}

pub(crate) type Runner = Box<dyn Fn() -> std::pin::Pin<Box<dyn Future<Output = Figures>>>>;

/// Boxes a closure that measures one round.
pub(crate) fn runner<F, Fut>(f: F) -> Runner
where
    F: Fn() -> Fut + 'static,
    Fut: Future<Output = Figures> + 'static,
{
    Box::new(move || Box::pin(f()))
}

/// A round of `calls` idem calls at `concurrency` on `idem`, each with key
/// `key_of(i)` and a no-op body.
pub(crate) fn idem_runner(
    idem: idem::Idempotency,
    scope: Arc<str>,
    concurrency: usize,
    calls: u64,
    key_of: fn(u64) -> u64,
) -> Runner {
    idem_runner_over(vec![idem], scope, concurrency, calls, key_of)
}

/// As [`idem_runner`], call `i` going to `handles[i % len]`.
pub(crate) fn idem_runner_over(
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

/// Whether a subject's `name` is one `IDEM_BENCH_SUBJECT`'s `filter` asks
/// for: names that contain it, or after a leading `=` the one it names.
fn subject_matches(name: &str, filter: &str) -> bool {
    match filter.strip_prefix('=') {
        Some(exact) => name == exact,
        None => name.contains(filter),
    }
}
