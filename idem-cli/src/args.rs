//! The command line, as clap reads it.

#[cfg(feature = "sqlite")]
use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Parser, Subcommand};

/// What `--help` ends with: the exit codes scripts test.
const EXIT_CODES: &str = "\
Exit codes:
  0  done
  1  no such record (inspect; forget or inspect by a --record prefix that matches none)
  2  bad arguments (no store, two stores, a malformed or ambiguous --record)
  3  the store cannot be reached, failed, or holds no idem records (nothing is changed)
  4  the output could not be written (a reader that stops early, as `| head`, is no error: 0)";

/// Operate idem's idempotency records: find stuck claims, inspect a key,
/// let a key run again, purge expired records, count them.
///
/// The store options go before or after the command:
/// `idem stats --sqlite app.db` and `idem --sqlite app.db stats` are the same.
#[derive(Debug, Parser)]
#[command(name = "idem", version, about, after_help = EXIT_CODES)]
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

/// The one store, given before or after the command. Not `required` in
/// clap (global arguments cannot be): `stores::open` says when none is.
#[derive(Debug, Args)]
#[group(multiple = false)]
pub(crate) struct StoreArgs {
    /// A Redis server, e.g. redis://127.0.0.1:6379 (its password is never
    /// printed; prefer the variable, which keeps it out of `ps`)
    #[cfg(feature = "redis")]
    #[arg(
        long,
        value_name = "URL",
        env = "IDEM_REDIS_URL",
        global = true,
        hide_env_values = true
    )]
    pub redis: Option<String>,
    /// A PostgreSQL database, e.g. postgres://app@localhost/app (its
    /// password is never printed; prefer the variable)
    #[cfg(feature = "postgres")]
    #[arg(
        long,
        value_name = "URL",
        env = "IDEM_POSTGRES_URL",
        global = true,
        hide_env_values = true
    )]
    pub postgres: Option<String>,
    /// A MySQL or MariaDB database, e.g. mysql://app@localhost/app (its
    /// password is never printed; prefer the variable)
    #[cfg(feature = "mysql")]
    #[arg(
        long,
        value_name = "URL",
        env = "IDEM_MYSQL_URL",
        global = true,
        hide_env_values = true
    )]
    pub mysql: Option<String>,
    /// A DynamoDB table written by `DynamoDbStore` (credentials and region
    /// from AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN and
    /// AWS_REGION; never created)
    #[cfg(feature = "dynamodb")]
    #[arg(long, value_name = "TABLE", env = "IDEM_DYNAMODB_TABLE", global = true)]
    pub dynamodb: Option<String>,
    /// A SQLite file written by `SqliteStore` (opened read-only where the
    /// command only reads; never created or upgraded)
    #[cfg(feature = "sqlite")]
    #[arg(long, value_name = "PATH", global = true)]
    pub sqlite: Option<PathBuf>,
}

/// Where records live inside the store, when not the default.
#[derive(Debug, Args)]
pub(crate) struct StoreOptions {
    /// PostgreSQL schema of the records table.
    #[cfg(feature = "postgres")]
    #[arg(long, default_value = "public", global = true)]
    pub schema: String,
    /// PostgreSQL or MySQL records table.
    #[cfg(any(feature = "postgres", feature = "mysql"))]
    #[arg(long, default_value = "idem_records", global = true)]
    pub table: String,
    /// DynamoDB endpoint, for a local emulator or a VPC endpoint.
    #[cfg(feature = "dynamodb")]
    #[arg(long, value_name = "URL", env = "AWS_ENDPOINT_URL", global = true)]
    pub endpoint_url: Option<String>,
    /// DynamoDB partition key prefix of the records.
    #[cfg(feature = "dynamodb")]
    #[arg(long, default_value = "idem#", global = true)]
    pub dynamodb_prefix: String,
    /// Redis key prefix of the records.
    #[cfg(feature = "redis")]
    #[arg(long, default_value = "idem:", global = true)]
    pub prefix: String,
}

#[derive(Debug, Subcommand)]
pub(crate) enum Command {
    /// Show one record: state, age, expiry, fingerprint, size, and its value.
    Inspect(Which),
    /// List records, oldest first.
    List(ListArgs),
    /// Remove one record (completed or in progress) and its saved steps, so
    /// its next call runs again.
    Forget(Which),
    /// Delete expired records and the steps of expired calls, in small
    /// batches with a pause between them so live traffic is not stalled.
    Purge(PurgeArgs),
    /// Count records by state.
    Stats,
}

impl Command {
    /// Whether the command only reads (the store is then opened read-only
    /// where it can be).
    pub(crate) fn reads_only(&self) -> bool {
        matches!(
            self,
            Command::Inspect(_) | Command::List(_) | Command::Stats
        )
    }
}

/// One record: by scope and key (hashed as the library does), by what an
/// HTTP client sent (as the HTTP layer derives its key), or by its hashed
/// key as `idem list` prints it.
#[derive(Debug, Args)]
#[group(required = true, multiple = true)]
pub(crate) struct Which {
    /// The scope the call was given; repeat it for a tuple scope, e.g.
    /// `--scope payments --scope acme` for `("payments", "acme")`. Each
    /// part is hashed as a string.
    #[arg(long, requires = "key", conflicts_with_all = ["record", "http"])]
    pub scope: Vec<String>,
    /// A request the HTTP layer guarded: its method and route as the
    /// router matched it, e.g. 'POST /orders' or 'PUT /orders/{id}'.
    #[cfg(feature = "http")]
    #[arg(
        long,
        value_name = "METHOD ROUTE",
        requires = "key",
        conflicts_with = "record"
    )]
    pub http: Option<String>,
    /// The idempotency key, hashed as a string (with --http, the
    /// `Idempotency-Key` header's text, without its quotes).
    #[arg(long, conflicts_with = "record")]
    pub key: Option<String>,
    /// With --http: a credential header the request carried, e.g.
    /// 'authorization: Bearer …'; repeat it for each header the layer's
    /// principal_headers names, in that order (by default Authorization
    /// alone). None: the anonymous caller.
    #[cfg(feature = "http")]
    #[arg(long, value_name = "NAME: VALUE", requires = "http")]
    pub header: Vec<String>,
    /// With --http: a session cookie the layer's principal_cookies names,
    /// as NAME=VALUE; repeat it for each, in that order.
    #[cfg(feature = "http")]
    #[arg(long, value_name = "NAME=VALUE", requires = "http")]
    pub cookie: Vec<String>,
    /// With --http: the principal the layer's own `principal` function
    /// returned for the request, instead of --header and --cookie.
    #[cfg(feature = "http")]
    #[arg(long, requires = "http", conflicts_with_all = ["header", "cookie"])]
    pub principal: Option<String>,
    /// The hashed key as `idem list` prints it, or a unique prefix of it
    /// (at least 4 hex digits), as git takes commits.
    #[arg(long, value_name = "HEX")]
    pub record: Option<String>,
}

#[derive(Debug, Args)]
pub(crate) struct PurgeArgs {
    /// Rows one statement deletes at most.
    #[arg(long, value_name = "ROWS", default_value_t = idem::admin::Purge::DEFAULT_BATCH)]
    pub batch: u32,
    /// The wait between two statements, e.g. 20ms, 0s (back to back).
    #[arg(long, value_name = "DURATION", value_parser = humantime::parse_duration, default_value = "20ms")]
    pub pause: Duration,
}

impl PurgeArgs {
    /// The purge's pacing.
    pub(crate) fn options(&self) -> idem::admin::Purge {
        idem::admin::Purge::default()
            .batch(self.batch)
            .pause(self.pause)
    }
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
