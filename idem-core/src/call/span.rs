//! The call's span, built only when someone would see it.

use super::Call;

/// The span's target, and the `log` target its records go to: the call's
/// module, as before the span moved to this file.
const TARGET: &str = "idem_core::call";

impl<P> Call<P> {
    /// The call's span: scope, short key hash, and (once known) outcome and
    /// whether it was replayed; `Span::none()` when neither a subscriber
    /// nor a `log` logger would see it (see `heard`), so that the call
    /// builds no span and entering it on every poll costs a branch.
    pub(super) fn span(&self) -> tracing::Span {
        if !may_be_heard() {
            return tracing::Span::none();
        }
        let span = tracing::info_span!(
            target: TARGET,
            "idem.call",
            scope = %self.scope,
            key = %self.key.short(),
            outcome = tracing::field::Empty,
            replayed = tracing::field::Empty,
            reconciled = tracing::field::Empty,
        );
        if heard(&span) {
            span
        } else {
            tracing::Span::none()
        }
    }
}

/// Whether anyone sees the call's span: a subscriber listening to it, or a
/// `log` logger printing its records (tracing's `log` feature logs the
/// fields of disabled spans) or its enters and exits.
fn heard(span: &tracing::Span) -> bool {
    !span.is_disabled() || logged()
}

/// Whether a `log` logger prints the span's records or its enters and
/// exits (tracing logs those under `tracing::span::active`).
fn logged() -> bool {
    log::log_enabled!(target: TARGET, log::Level::Info)
        || log::log_enabled!(target: "tracing::span::active", log::Level::Trace)
}

/// Whether the span could be heard at all: `info_span!` itself first
/// checks the level filter, and without a subscriber at INFO or a logger
/// building the span would only make a disabled span nobody reads.
fn may_be_heard() -> bool {
    use tracing::level_filters::{LevelFilter, STATIC_MAX_LEVEL};
    let info = LevelFilter::INFO;
    (STATIC_MAX_LEVEL >= info && LevelFilter::current() >= info) || logged()
}
