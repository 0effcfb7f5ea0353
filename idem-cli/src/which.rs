//! Which record `inspect` and `forget` name: scope and key hashed as the
//! library hashes them, an HTTP request's method, route, key and
//! credentials as the HTTP layer keys them, or the hashed key (or a unique
//! prefix of it) as `idem list` prints it.

#[cfg(feature = "http")]
mod http;

use idem::admin::ListFilter;
use idem::key::RecordKey;

use crate::Failure;
use crate::args::Which;
use crate::stores::Opened;

/// The shortest `--record` prefix taken.
const MIN_PREFIX: usize = 4;

/// What the arguments name, read before the store is opened.
pub(crate) enum Wanted {
    /// By scope and key, or by an HTTP request: how it was named, for
    /// messages.
    Named(RecordKey, Naming),
    /// All 64 hex digits.
    Record(RecordKey),
    /// A prefix, lowercased: looked up in the store.
    Prefix(String),
}

/// How a record was named, when not by its hashed key.
pub(crate) enum Naming {
    /// A scope's parts.
    Scope(Vec<String>),
    /// An HTTP request, described.
    #[cfg(feature = "http")]
    Http(String),
}

/// The key found, and how it was named.
pub(crate) struct Resolved {
    key: RecordKey,
    named: Option<Naming>,
}

impl Resolved {
    pub(crate) fn key(&self) -> &RecordKey {
        &self.key
    }

    /// Exit 1's message; with a scope, how a tuple scope is given.
    pub(crate) fn not_found(&self, store: &str) -> String {
        let hex = self.key.to_hex();
        match &self.named {
            #[cfg(feature = "http")]
            Some(Naming::Http(request)) => format!(
                "no record under {hex} in {store} for {request}; give the route as the router \
                 matched it (`/orders/{{id}}`, not `/orders/7`) and the credential headers the \
                 layer hashes (--header, --cookie), or --principal if the layer has its own"
            ),
            Some(Naming::Scope(parts)) => format!(
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
    #[cfg(feature = "http")]
    if let Some(request) = &which.http {
        let (record, described) = http::record_key(request, key, which)?;
        return Ok(Wanted::Named(record, Naming::Http(described)));
    }
    let s = &which.scope;
    if s.is_empty() {
        return Err(Failure::usage(
            "--key names a record with --scope or --http",
        ));
    }
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
    Ok(Wanted::Named(record, Naming::Scope(s.clone())))
}

/// The one key `wanted` names; a prefix is looked up among all records
/// (none: exit 1; several: exit 2, listing them).
pub(crate) async fn resolve(wanted: Wanted, opened: &Opened) -> Result<Resolved, Failure> {
    let prefix = match wanted {
        Wanted::Named(key, named) => {
            return Ok(Resolved {
                key,
                named: Some(named),
            });
        }
        Wanted::Record(key) => return Ok(Resolved { key, named: None }),
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
            named: None,
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
