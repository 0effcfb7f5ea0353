//! The command line, as clap reads it.

use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Parser, Subcommand};

/// Operate idem's idempotency records: find stuck claims, inspect a key,
/// let a key run again, purge expired records, count them.
#[derive(Debug, Parser)]
#[command(name = "idem", version, about, long_about = None)]
pub(crate) struct Cli {
    #[command(flatten)]
    pub store: StoreArgs,
    #[command(flatten)]
    pub options: StoreOptions,
    /// Print JSON (one document) instead of a table, for scripts.
    #[arg(long, global = true)]
    pub json: bool,
    #[command(subcommand)]
    pub command: Command,
}

/// Exactly one store.
#[derive(Debug, Args)]
#[group(required = true, multiple = false)]
pub(crate) struct StoreArgs {
    /// A Redis server, e.g. redis://127.0.0.1:6379
    #[arg(long, value_name = "URL", env = "IDEM_REDIS_URL")]
    pub redis: Option<String>,
    /// A PostgreSQL database, e.g. postgres://app@localhost/app
    #[arg(long, value_name = "URL", env = "IDEM_POSTGRES_URL")]
    pub postgres: Option<String>,
    /// A SQLite file written by `SqliteStore`.
    #[arg(long, value_name = "PATH")]
    pub sqlite: Option<PathBuf>,
}

/// Where records live inside the store, when not the default.
#[derive(Debug, Args)]
pub(crate) struct StoreOptions {
    /// PostgreSQL schema of the records table.
    #[arg(long, default_value = "public", global = true)]
    pub schema: String,
    /// PostgreSQL records table.
    #[arg(long, default_value = "idem_records", global = true)]
    pub table: String,
    /// Redis key prefix of the records.
    #[arg(long, default_value = "idem:", global = true)]
    pub prefix: String,
}

#[derive(Debug, Subcommand)]
pub(crate) enum Command {
    /// Show one record: state, age, expiry, fingerprint, size, and its value as JSON.
    Inspect(Which),
    /// List records, oldest first.
    List(ListArgs),
    /// Remove one record (completed or in progress) so its next call runs again.
    Forget(Which),
    /// Delete expired records.
    Purge,
    /// Count records by state.
    Stats,
}

/// One record: by scope and key (hashed as the library does), or by its
/// hashed key as `idem list` prints it.
#[derive(Debug, Args)]
#[group(required = true, multiple = true)]
pub(crate) struct Which {
    /// The scope the call was given; repeat it for a tuple scope, e.g.
    /// `--scope payments --scope acme` for `("payments", "acme")`. Each
    /// part is hashed as a string.
    #[arg(long, requires = "key", conflicts_with = "record")]
    pub scope: Vec<String>,
    /// The idempotency key, hashed as a string.
    #[arg(long, requires = "scope", conflicts_with = "record")]
    pub key: Option<String>,
    /// The hashed key: 64 hex digits, as `idem list` prints it.
    #[arg(long, value_name = "HEX")]
    pub record: Option<String>,
}

#[derive(Debug, Args)]
pub(crate) struct ListArgs {
    /// Only live in-progress claims.
    #[arg(long)]
    pub in_progress: bool,
    /// Only records claimed at least this long ago, e.g. 10m, 1h30m, 2d.
    #[arg(long, value_name = "DURATION", value_parser = humantime::parse_duration)]
    pub older_than: Option<Duration>,
    /// At most this many records.
    #[arg(long, default_value_t = 1000)]
    pub limit: usize,
}
