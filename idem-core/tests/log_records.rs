//! With tracing's `log` feature (sqlx turns it on) and no subscriber, a
//! `log` logger sees the call span's records: the outcome is recorded
//! into the span whenever such a logger listens.

use std::sync::Mutex;

static LINES: Mutex<Vec<String>> = Mutex::new(Vec::new());

struct Captured;

impl log::Log for Captured {
    fn enabled(&self, metadata: &log::Metadata<'_>) -> bool {
        metadata.level() <= log::Level::Info
    }
    fn log(&self, record: &log::Record<'_>) {
        if record.target() == "idem_core::call" {
            LINES.lock().unwrap().push(record.args().to_string());
        }
    }
    fn flush(&self) {}
}

#[tokio::test(flavor = "current_thread")]
async fn a_log_logger_sees_the_outcome_without_a_subscriber() {
    log::set_logger(&Captured).unwrap();
    log::set_max_level(log::LevelFilter::Info);
    let idem = idem::Idempotency::new(idem::MemoryStore::new());
    let out: Result<u8, idem::Error> = idem.call("logs", "k").run(|| async { Ok(1) }).await;
    assert_eq!(out.unwrap(), 1);
    let lines = LINES.lock().unwrap().clone();
    assert!(
        lines.iter().any(|line| line.contains("outcome=ran")),
        "{lines:?}"
    );
    assert!(
        lines.iter().any(|line| line.contains("replayed=false")),
        "{lines:?}"
    );
}
