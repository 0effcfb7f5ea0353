//! `idem`: operate idem's idempotency records in Redis, PostgreSQL or
//! SQLite. See `idem --help` and README.md ("Operating records").
//!
//! Exit codes: 0 done; 1 no such record (`inspect`); 2 bad arguments;
//! 3 the store cannot be reached or failed.

#![forbid(unsafe_code)]

mod args;
mod render;
mod stores;

use std::fmt::Display;
use std::process::ExitCode;

use clap::Parser;
use idem::admin::{Admin, ListFilter};
use idem::key::RecordKey;
use serde_json::json;

use args::{Cli, Command, Which};

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

    /// A store that failed to open or answer: exit code 3.
    pub fn store(name: &str, err: impl Display) -> Self {
        Failure {
            code: Self::STORE,
            message: format!("{name}: {err}"),
        }
    }

    fn usage(message: impl Into<String>) -> Self {
        Failure {
            code: Self::USAGE,
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
    match runtime.block_on(run(&cli)) {
        Ok(out) => {
            print!("{out}");
            ExitCode::SUCCESS
        }
        Err(failure) => {
            eprintln!("idem: {}", failure.message);
            ExitCode::from(failure.code)
        }
    }
}

/// Runs the command; what it prints on success.
async fn run(cli: &Cli) -> Result<String, Failure> {
    // Arguments first: a bad one is reported without touching the store.
    let key = match &cli.command {
        Command::Inspect(which) | Command::Forget(which) => Some(record_key(which)?),
        _ => None,
    };
    let (store, name) = stores::open(&cli.store, &cli.options).await?;
    let failed = |err| Failure::store(&name, err);
    let json = cli.json;
    let text = |value: serde_json::Value| format!("{value:#}\n");
    match (&cli.command, key) {
        (Command::Inspect(_), Some(key)) => {
            let Some(info) = store.inspect(&key).await.map_err(failed)? else {
                return Err(Failure {
                    code: Failure::NOT_FOUND,
                    message: format!("no record under {} in {name}", key.to_hex()),
                });
            };
            Ok(if json {
                text(render::record_json(&info))
            } else {
                render::record_text(&info)
            })
        }
        (Command::Forget(_), Some(key)) => {
            store.forget(&key).await.map_err(failed)?;
            Ok(if json {
                text(json!({ "forgot": key.to_hex() }))
            } else {
                format!("forgot {} (if it was there)\n", key.to_hex())
            })
        }
        (Command::List(list), _) => {
            let mut filter = ListFilter::default().limit(list.limit);
            if list.in_progress {
                filter = filter.in_progress();
            }
            if let Some(age) = list.older_than {
                filter = filter.older_than(age);
            }
            let records = list_records(store.as_ref(), &filter)
                .await
                .map_err(failed)?;
            Ok(if json {
                let all: Vec<_> = records.iter().map(render::record_json).collect();
                text(serde_json::Value::Array(all))
            } else {
                render::list_text(&records)
            })
        }
        (Command::Purge, _) => {
            let purged = store.purge().await.map_err(failed)?;
            Ok(if json {
                text(json!({ "purged": purged }))
            } else {
                format!("purged {purged} expired record(s)\n")
            })
        }
        (Command::Stats, _) => {
            let stats = store.stats().await.map_err(failed)?;
            Ok(if json {
                text(render::stats_json(&stats))
            } else {
                render::stats_text(&stats)
            })
        }
        (Command::Inspect(_) | Command::Forget(_), None) => unreachable!("resolved above"),
    }
}

async fn list_records(
    store: &dyn Admin,
    filter: &ListFilter,
) -> Result<Vec<idem::admin::RecordInfo>, idem::StoreError> {
    store.list(filter).await
}

/// The hashed key `which` names: from `--record`, or scope and key hashed
/// as the library hashes string parts.
fn record_key(which: &Which) -> Result<RecordKey, Failure> {
    if let Some(hex) = &which.record {
        return parse_hex(hex).map(RecordKey::from_bytes).ok_or_else(|| {
            Failure::usage(format!(
                "--record must be 64 hex digits (as `idem list` prints), not `{hex}`"
            ))
        });
    }
    let key = which.key.as_deref().unwrap_or_default();
    if key.is_empty() {
        return Err(Failure::usage("--key must not be empty"));
    }
    let s = &which.scope;
    Ok(match s.as_slice() {
        [a] => RecordKey::new(a, key),
        [a, b] => RecordKey::new(&(a, b), key),
        [a, b, c] => RecordKey::new(&(a, b, c), key),
        [a, b, c, d] => RecordKey::new(&(a, b, c, d), key),
        _ => {
            return Err(Failure::usage(
                "give --scope once, or up to 4 times for a tuple scope",
            ));
        }
    })
}

fn parse_hex(hex: &str) -> Option<[u8; 32]> {
    if hex.len() != 64 || !hex.is_ascii() {
        return None;
    }
    let mut out = [0u8; 32];
    for (i, byte) in out.iter_mut().enumerate() {
        *byte = u8::from_str_radix(&hex[2 * i..2 * i + 2], 16).ok()?;
    }
    Some(out)
}
