//! Refusing a Redis that may evict idem's keys: every idem key has a TTL,
//! so under any `maxmemory-policy` but `noeviction` a server under memory
//! pressure may delete claims and records, and a retry then runs the body
//! again.

use idem_contract::StoreError;
use redis::Value;

/// What the server said about its eviction policy, from `CONFIG GET
/// maxmemory-policy` (one answer per primary on a cluster), or `INFO
/// memory` where `CONFIG` is disabled.
pub(super) fn policies(answer: &Value) -> Vec<String> {
    let mut words = Vec::new();
    flatten(answer, &mut words);
    let mut found = Vec::new();
    for pair in words.windows(2) {
        if pair[0].eq_ignore_ascii_case("maxmemory-policy") {
            found.push(pair[1].clone());
        }
    }
    for word in &words {
        for line in word.lines() {
            if let Some(policy) = line.trim().strip_prefix("maxmemory_policy:") {
                found.push(policy.to_owned());
            }
        }
    }
    found
}

/// The texts of an answer (one per node on a cluster), keys and values.
pub(super) fn flatten(value: &Value, out: &mut Vec<String>) {
    match value {
        Value::BulkString(bytes) => out.push(String::from_utf8_lossy(bytes).into_owned()),
        Value::SimpleString(text) | Value::VerbatimString { text, .. } => out.push(text.clone()),
        Value::Array(items) | Value::Set(items) => items.iter().for_each(|item| flatten(item, out)),
        Value::Map(pairs) => pairs.iter().for_each(|(key, value)| {
            flatten(key, out);
            flatten(value, out);
        }),
        _ => {}
    }
}

/// Accepts `noeviction` everywhere; otherwise refuses, or, when the
/// application allowed eviction, warns.
pub(super) fn check(policies: &[String], allow_eviction: bool) -> Result<(), StoreError> {
    if policies.is_empty() {
        if allow_eviction {
            tracing::warn!(
                "idem: the Redis eviction policy could not be read; allowed by allow_eviction()"
            );
            return Ok(());
        }
        return Err(StoreError::misconfigured(
            "redis",
            "the server's maxmemory-policy could not be read (CONFIG GET and INFO memory were both refused), so idem cannot tell whether Redis may evict its claims and records; set `maxmemory-policy noeviction` and allow `CONFIG GET`, or accept the risk with `RedisStore::builder().allow_eviction()`",
        ));
    }
    let Some(evicting) = policies.iter().find(|p| p.as_str() != "noeviction") else {
        return Ok(());
    };
    if allow_eviction {
        tracing::warn!(policy = %evicting, "idem: Redis may evict idempotency keys under memory pressure; allowed by allow_eviction()");
        return Ok(());
    }
    Err(StoreError::misconfigured(
        "redis",
        format!(
            "the server's maxmemory-policy is `{evicting}`: under memory pressure Redis may delete idem's claims and records (every idem key has a TTL), and a retry would then run the body again; set `maxmemory-policy noeviction` on the server (CONFIG SET maxmemory-policy noeviction, or the managed service's parameter group), or accept the risk with `RedisStore::builder().allow_eviction()`"
        ),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bulk(text: &str) -> Value {
        Value::BulkString(text.as_bytes().to_vec())
    }

    #[test]
    fn reads_config_get_and_info_answers() {
        let config = Value::Array(vec![bulk("maxmemory-policy"), bulk("volatile-lru")]);
        assert_eq!(policies(&config), ["volatile-lru"]);
        let info = bulk("# Memory\r\nused_memory:1\r\nmaxmemory_policy:noeviction\r\n");
        assert_eq!(policies(&info), ["noeviction"]);
        let cluster = Value::Map(vec![
            (
                bulk("10.0.0.1:7000"),
                Value::Array(vec![bulk("maxmemory-policy"), bulk("noeviction")]),
            ),
            (
                bulk("10.0.0.2:7000"),
                Value::Array(vec![bulk("maxmemory-policy"), bulk("allkeys-lru")]),
            ),
        ]);
        assert_eq!(policies(&cluster), ["noeviction", "allkeys-lru"]);
    }

    #[test]
    fn only_noeviction_passes_unless_allowed() {
        let ok = ["noeviction".to_owned()];
        let lru = ["noeviction".to_owned(), "volatile-lru".to_owned()];
        assert!(check(&ok, false).is_ok());
        let err = check(&lru, false).unwrap_err().to_string();
        assert!(
            err.contains("volatile-lru") && err.contains("allow_eviction"),
            "{err}"
        );
        assert!(check(&lru, true).is_ok());
        assert!(check(&[], false).is_err());
    }
}
