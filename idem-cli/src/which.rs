//! Which record `inspect` and `forget` name: scope and key hashed as the
//! library hashes them, or the hashed key (or a unique prefix of it) as
//! `idem list` prints it.

use idem::admin::ListFilter;
use idem::key::RecordKey;

use crate::Failure;
use crate::args::Which;
use crate::stores::Opened;

/// The shortest `--record` prefix taken.
const MIN_PREFIX: usize = 4;

/// What the arguments name, read before the store is opened.
pub(crate) enum Wanted {
    /// By scope and key: the scope's parts, for messages.
    Scoped(RecordKey, Vec<String>),
    /// All 64 hex digits.
    Record(RecordKey),
    /// A prefix, lowercased: looked up in the store.
    Prefix(String),
}

/// The key found, and how it was named.
pub(crate) struct Resolved {
    key: RecordKey,
    scope: Option<Vec<String>>,
}

impl Resolved {
    pub(crate) fn key(&self) -> &RecordKey {
        &self.key
    }

    /// Exit 1's message; with a scope, how a tuple scope is given.
    pub(crate) fn not_found(&self, store: &str) -> String {
        let hex = self.key.to_hex();
        match &self.scope {
            Some(parts) => format!(
                "no record under {hex} in {store} for the scope {parts:?}; a tuple scope such as \
                 (\"payments\", \"acme\") is given by repeating --scope \
                 (--scope payments --scope acme), each part hashed as a string"
            ),
            None => format!("no record under {hex} in {store}"),
        }
    }
}

/// Reads `which` without the store; bad arguments are exit 2.
pub(crate) fn parse(which: &Which) -> Result<Wanted, Failure> {
    if let Some(hex) = &which.record {
        let hex = hex.to_ascii_lowercase();
        let valid =
            (MIN_PREFIX..=64).contains(&hex.len()) && hex.bytes().all(|b| b.is_ascii_hexdigit());
        if !valid {
            return Err(Failure::usage(format!(
                "--record takes the 64 hex digits `idem list` prints, or a unique prefix of at least {MIN_PREFIX}, not `{hex}`"
            )));
        }
        return Ok(match parse_hex(&hex) {
            Some(bytes) => Wanted::Record(RecordKey::from_bytes(bytes)),
            None => Wanted::Prefix(hex),
        });
    }
    let key = which.key.as_deref().unwrap_or_default();
    if key.is_empty() {
        return Err(Failure::usage("--key must not be empty"));
    }
    let s = &which.scope;
    let record = match s.as_slice() {
        [a] => RecordKey::new(a, key),
        [a, b] => RecordKey::new(&(a, b), key),
        [a, b, c] => RecordKey::new(&(a, b, c), key),
        [a, b, c, d] => RecordKey::new(&(a, b, c, d), key),
        _ => {
            return Err(Failure::usage(
                "give --scope once, or up to 4 times for a tuple scope",
            ));
        }
    };
    Ok(Wanted::Scoped(record, s.clone()))
}

/// The one key `wanted` names; a prefix is looked up among all records
/// (none: exit 1; several: exit 2, listing them).
pub(crate) async fn resolve(wanted: Wanted, opened: &Opened) -> Result<Resolved, Failure> {
    let prefix = match wanted {
        Wanted::Scoped(key, scope) => {
            return Ok(Resolved {
                key,
                scope: Some(scope),
            });
        }
        Wanted::Record(key) => return Ok(Resolved { key, scope: None }),
        Wanted::Prefix(prefix) => prefix,
    };
    let all = opened
        .store
        .list(&ListFilter::default())
        .await
        .map_err(|e| opened.failed(e))?;
    let matching: Vec<RecordKey> = all
        .iter()
        .map(|info| info.key)
        .filter(|key| key.to_hex().starts_with(&prefix))
        .collect();
    match matching.as_slice() {
        [key] => Ok(Resolved {
            key: *key,
            scope: None,
        }),
        [] => Err(Failure::not_found(format!(
            "no record in {} starts with {prefix}",
            opened.name
        ))),
        several => {
            let keys: Vec<String> = several.iter().map(RecordKey::to_hex).collect();
            Err(Failure::usage(format!(
                "--record {prefix} is ambiguous: {} records start with it ({}); give more digits",
                several.len(),
                keys.join(", ")
            )))
        }
    }
}

fn parse_hex(hex: &str) -> Option<[u8; 32]> {
    if hex.len() != 64 {
        return None;
    }
    let mut out = [0u8; 32];
    for (i, byte) in out.iter_mut().enumerate() {
        *byte = u8::from_str_radix(&hex[2 * i..2 * i + 2], 16).ok()?;
    }
    Some(out)
}
