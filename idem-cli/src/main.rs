//! `idem`: operate idem's idempotency records in Redis, PostgreSQL, SQLite,
//! MySQL/MariaDB or DynamoDB. See `idem --help` and README.md ("Operating records").
//!
//! Exit codes: 0 done; 1 no such record; 2 bad arguments; 3 the store
//! cannot be reached, failed, or holds no idem records; 4 the output could
//! not be written. A reader that stops early (`idem list | head -1`) is no
//! failure: the command ends quietly with 0, as other Unix tools do.

#![forbid(unsafe_code)]

mod args;
mod render;
#[cfg(any(feature = "redis", feature = "postgres", feature = "mysql"))]
mod secret;
mod stores;
mod which;

use std::io::{self, Write as _};
use std::process::ExitCode;

use clap::Parser;
use idem::admin::ListFilter;
use serde_json::json;

use args::{Cli, Command};

/// Why a command failed, and its exit code.
#[derive(Debug)]
pub struct Failure {
    code: u8,
    message: String,
}

impl Failure {
    const NOT_FOUND: u8 = 1;
    const USAGE: u8 = 2;
    const STORE: u8 = 3;
    const OUTPUT: u8 = 4;

    /// A store that failed to open or answer: exit code 3. `message`
    /// names the store, never its password.
    pub fn store(message: &str) -> Self {
        Failure {
            code: Self::STORE,
            message: message.to_owned(),
        }
    }

    fn usage(message: impl Into<String>) -> Self {
        Failure {
            code: Self::USAGE,
            message: message.into(),
        }
    }

    fn not_found(message: impl Into<String>) -> Self {
        Failure {
            code: Self::NOT_FOUND,
            message: message.into(),
        }
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a tokio runtime");
    let failure = match runtime.block_on(run(&cli)) {
        Ok(out) => match print(&out) {
            Ok(()) => return ExitCode::SUCCESS,
            Err(err) => Failure {
                code: Failure::OUTPUT,
                message: format!("cannot write the output: {err}"),
            },
        },
        Err(failure) => failure,
    };
    // Nothing is left to tell if stderr is gone too.
    let _ = writeln!(io::stderr().lock(), "idem: {}", failure.message);
    ExitCode::from(failure.code)
}

/// Writes a command's output. A reader that closed its end (`idem list |
/// head -1`) took what it wanted: that ends the output, and is no error.
/// (Rust ignores SIGPIPE, so the write says so; `print!` would panic.)
fn print(out: &str) -> io::Result<()> {
    let mut stdout = io::stdout().lock();
    match stdout
        .write_all(out.as_bytes())
        .and_then(|()| stdout.flush())
    {
        Err(err) if err.kind() == io::ErrorKind::BrokenPipe => Ok(()),
        written => written,
    }
}

/// Runs the command; what it prints on success.
async fn run(cli: &Cli) -> Result<String, Failure> {
    // Arguments first: a bad one is reported without touching the store.
    let wanted = match &cli.command {
        Command::Inspect(which) | Command::Forget(which) => Some(which::parse(which)?),
        _ => None,
    };
    let opened = stores::open(&cli.store, &cli.options, cli.command.reads_only()).await?;
    let store = opened.store.as_ref();
    let json = cli.json;
    let text = |value: serde_json::Value| format!("{value:#}\n");
    match &cli.command {
        Command::Inspect(_) => {
            let key = which::resolve(wanted.expect("parsed above"), &opened).await?;
            let Some(info) = store
                .inspect(key.key())
                .await
                .map_err(|e| opened.failed(e))?
            else {
                return Err(Failure::not_found(key.not_found(&opened.name)));
            };
            Ok(if json {
                text(render::record_json(&info))
            } else {
                format!(
                    "store        {}\n{}",
                    opened.name,
                    render::record_text(&info)
                )
            })
        }
        Command::Forget(_) => {
            let key = which::resolve(wanted.expect("parsed above"), &opened).await?;
            let key = key.key();
            store.forget(key).await.map_err(|e| opened.failed(e))?;
            Ok(if json {
                text(json!({ "forgot": key.to_hex() }))
            } else {
                format!(
                    "forgot {} in {} (if it was there)\n",
                    key.to_hex(),
                    opened.name
                )
            })
        }
        Command::List(list) => {
            let mut filter = ListFilter::default().limit(list.limit);
            if list.in_progress {
                filter = filter.in_progress();
            }
            if let Some(age) = list.older_than {
                filter = filter.older_than(age);
            }
            let records = store.list(&filter).await.map_err(|e| opened.failed(e))?;
            Ok(if json {
                let all: Vec<_> = records.iter().map(render::record_json).collect();
                text(serde_json::Value::Array(all))
            } else {
                render::list_text(&records, &opened.name)
            })
        }
        Command::Purge(args) => {
            let purged = store
                .purge_with(&args.options())
                .await
                .map_err(|e| opened.failed(e))?;
            Ok(if json {
                text(render::purged_json(&purged))
            } else {
                render::purged_text(&purged, &opened.name)
            })
        }
        Command::Stats => {
            let stats = store.stats().await.map_err(|e| opened.failed(e))?;
            Ok(if json {
                text(render::stats_json(&stats))
            } else {
                format!(
                    "store        {}\n{}",
                    opened.name,
                    render::stats_text(&stats)
                )
            })
        }
    }
}
