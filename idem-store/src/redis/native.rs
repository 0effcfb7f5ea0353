//! Native compare-and-set: on Valkey ≥ 8.1 (`SET … IFEQ`), Valkey ≥ 9.0
//! (`DELIFEQ`) and Redis ≥ 8.4 (`SET … IFEQ`, `DELEX … IFEQ`) the fenced
//! operations compare the claim's whole value in a native command instead of
//! running Lua, which costs the server several times a `SET`.
//!
//! The whole value is compared, and it holds more than the token (the
//! fingerprint, the claim's time, the call site), so the store keeps the
//! value of each claim it won until the claim is completed or released
//! ([`Kept`]). An operation whose claim value is not kept (a claim won by
//! another `RedisStore`, or before the server was detected) runs the
//! script, with the same fencing.
//!
//! A claim's key outlives its lease (see `value::KEPT_AFTER_LEASE_MS`), so
//! a native step, which cannot read the time, is sent only while the
//! lease is surely live by this host's clock (`Kept::live`); later, the
//! script judges the lapse by Redis's. Fencing never rests on that clock:
//! a claim taken over has another value, which `IFEQ` refuses.

use std::sync::Mutex;
use std::sync::atomic::{AtomicU8, Ordering};
use std::time::{Duration, Instant};

use foldhash::HashMap;
use idem_contract::key::RecordKey;
use idem_contract::store::{Fence, Token};

/// `SET key value IFEQ old … GET` is understood.
const SET_IFEQ: u8 = 1;
/// `DELIFEQ key value` (Valkey ≥ 9.0).
const DELIFEQ: u8 = 2;
/// `DELEX key IFEQ value` (Redis ≥ 8.4).
const DELEX: u8 = 4;

/// At most this many claim values are kept; when full, the map is
/// emptied (the claims in flight then finish by script). It only fills
/// with claims that were neither completed nor released.
const MAX_KEPT: usize = 1 << 16;

/// What the server understands, and the values of the claims this store
/// holds there.
#[derive(Default)]
pub(super) struct Native {
    commands: AtomicU8,
    claims: Mutex<HashMap<(RecordKey, Token), Kept>>,
}

/// The value of a claim this store won, and until when its lease is
/// surely live: the instant before the claim (or its latest renewal) was
/// sent, plus the lease, less a margin for clocks ticking at other rates.
pub(super) struct Kept {
    pub(super) value: Vec<u8>,
    pub(super) live_until: Instant,
    /// The call has steps (found or saved): its release may leave a
    /// marker, which only the script does.
    pub(super) stepped: bool,
}

/// Until when a lease sent at `sent` is surely live by this host's clock:
/// Redis starts it later than `sent`, and a clock ticking up to 3% faster
/// than Redis's still ends it first.
pub(super) fn live_until(sent: Instant, lease: Duration) -> Instant {
    sent + lease - lease / 32
}

impl Kept {
    /// Whether the lease is surely live now, so a native step may be sent.
    pub(super) fn live(&self) -> bool {
        Instant::now() < self.live_until
    }
}

/// How a native fenced operation releases a claim.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Delete {
    IfEq,
    Delex,
}

impl Native {
    /// Sets what the server understands, from `INFO server` texts (one per
    /// primary): what all of them understand.
    pub(super) fn detected(&self, infos: &[String]) {
        let commands = infos
            .iter()
            .map(|info| understood(info))
            .reduce(|all, one| all & one)
            .unwrap_or(0);
        self.commands.store(commands, Ordering::Relaxed);
    }

    /// Forgets the native commands: the server refused one (a failover to
    /// an older server); scripts until the next detection.
    pub(super) fn refused(&self) {
        self.commands.store(0, Ordering::Relaxed);
    }

    /// Whether `SET … IFEQ` can complete and renew.
    pub(super) fn set_ifeq(&self) -> bool {
        self.commands.load(Ordering::Relaxed) & SET_IFEQ != 0
    }

    /// The native delete-if-equal, if the server has one.
    pub(super) fn delete(&self) -> Option<Delete> {
        let commands = self.commands.load(Ordering::Relaxed);
        if commands & DELIFEQ != 0 {
            Some(Delete::IfEq)
        } else if commands & DELEX != 0 {
            Some(Delete::Delex)
        } else {
            None
        }
    }

    /// Keeps the value of a claim this store won.
    pub(super) fn keep(&self, key: RecordKey, token: Token, kept: Kept) {
        let mut claims = self.claims.lock().unwrap_or_else(|e| e.into_inner());
        if claims.len() >= MAX_KEPT {
            claims.clear();
        }
        claims.insert((key, token), kept);
    }

    /// The kept value of a claim, no longer kept.
    pub(super) fn take(&self, key: RecordKey, token: Token) -> Option<Kept> {
        let mut claims = self.claims.lock().unwrap_or_else(|e| e.into_inner());
        claims.remove(&(key, token))
    }

    /// The kept value of a claim whose lease is surely live, which stays
    /// kept.
    pub(super) fn live(&self, key: RecordKey, token: Token) -> Option<Vec<u8>> {
        let claims = self.claims.lock().unwrap_or_else(|e| e.into_inner());
        claims
            .get(&(key, token))
            .filter(|kept| kept.live())
            .map(|kept| kept.value.clone())
    }

    /// A kept claim's call saved a step.
    pub(super) fn stepped(&self, key: RecordKey, token: Token) {
        let mut claims = self.claims.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(kept) = claims.get_mut(&(key, token)) {
            kept.stepped = true;
        }
    }

    /// A kept claim was renewed: live until `live_until`.
    pub(super) fn renewed(&self, key: RecordKey, token: Token, live_until: Instant) {
        let mut claims = self.claims.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(kept) = claims.get_mut(&(key, token)) {
            kept.live_until = live_until;
        }
    }
}

/// The native commands one server's `INFO server` says it has.
fn understood(info: &str) -> u8 {
    let field = |name: &str| {
        info.lines()
            .find_map(|line| line.trim().strip_prefix(name))
            .map(version)
    };
    // Valkey also reports a `redis_version` (7.2.4, for clients): its own
    // field comes first.
    if let Some(valkey) = field("valkey_version:") {
        let mut commands = 0;
        if valkey >= (8, 1) {
            commands |= SET_IFEQ;
        }
        if valkey >= (9, 0) {
            commands |= DELIFEQ;
        }
        return commands;
    }
    match field("redis_version:") {
        Some(redis) if redis >= (8, 4) => SET_IFEQ | DELEX,
        _ => 0,
    }
}

/// `major.minor` of a version text (0.0 when unreadable: no native).
fn version(text: &str) -> (u32, u32) {
    let mut parts = text.split('.').map(|part| part.parse().unwrap_or(0));
    (parts.next().unwrap_or(0), parts.next().unwrap_or(0))
}

/// What a `SET … IFEQ claim … GET` answered, as a fence: the value it
/// found. `again` is the value a completion sent once more would find if
/// its first sending landed (see `scripts::COMPLETE`).
pub(super) fn fence_of(found: Option<&[u8]>, claim: &[u8], again: Option<&[u8]>) -> Fence {
    match found {
        None => Fence::Expired,
        Some(found) if found == claim => Fence::Held,
        Some(found) if again.is_some_and(|again| found == again) => Fence::Held,
        Some(_) => Fence::Lost,
    }
}

/// Whether the server refused a native command as unknown or malformed
/// (an older server after a failover), not for any reason of ours.
pub(super) fn not_understood(err: &redis::RedisError) -> bool {
    if err.is_io_error() || err.is_timeout() || err.is_connection_dropped() {
        return false;
    }
    let text = err.to_string().to_ascii_lowercase();
    text.contains("syntax error") || text.contains("unknown command")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_tell_the_native_commands() {
        let valkey = |v: &str| format!("# Server\r\nredis_version:7.2.4\r\nvalkey_version:{v}\r\n");
        assert_eq!(understood(&valkey("9.1.2")), SET_IFEQ | DELIFEQ);
        assert_eq!(understood(&valkey("8.1.0")), SET_IFEQ);
        assert_eq!(understood(&valkey("8.0.2")), 0);
        assert_eq!(understood("redis_version:8.4.0\r\n"), SET_IFEQ | DELEX);
        assert_eq!(understood("redis_version:10.0.0\r\n"), SET_IFEQ | DELEX);
        assert_eq!(understood("redis_version:8.2.1\r\n"), 0);
        assert_eq!(understood("redis_version:7.2.4\r\n"), 0);
        assert_eq!(understood("redis_version:x\r\n"), 0);
        assert_eq!(understood(""), 0);
    }

    #[test]
    fn a_cluster_has_what_every_primary_has() {
        let native = Native::default();
        native.detected(&["valkey_version:9.0.0".into(), "valkey_version:9.1.2".into()]);
        assert!(native.set_ifeq());
        assert_eq!(native.delete(), Some(Delete::IfEq));
        native.detected(&["valkey_version:9.0.0".into(), "valkey_version:8.1.1".into()]);
        assert!(native.set_ifeq());
        assert_eq!(native.delete(), None);
        native.detected(&["valkey_version:9.0.0".into(), "redis_version:7.2.4".into()]);
        assert!(!native.set_ifeq());
        native.detected(&[]);
        assert!(!native.set_ifeq());
    }

    #[test]
    fn a_found_value_tells_the_fence() {
        assert_eq!(fence_of(None, b"P1", None), Fence::Expired);
        assert_eq!(fence_of(Some(b"P1"), b"P1", None), Fence::Held);
        assert_eq!(fence_of(Some(b"P2"), b"P1", None), Fence::Lost);
        assert_eq!(fence_of(Some(b"Crec"), b"P1", None), Fence::Lost);
        assert_eq!(fence_of(Some(b"Crec"), b"P1", Some(b"Crec")), Fence::Held);
        assert_eq!(fence_of(Some(b"Cother"), b"P1", Some(b"Crec")), Fence::Lost);
    }

    #[test]
    fn a_full_map_starts_over() {
        let native = Native::default();
        let key = RecordKey::new("s", "k");
        let kept = || Kept {
            value: vec![1],
            live_until: Instant::now() + Duration::from_secs(60),
            stepped: false,
        };
        for n in 0..MAX_KEPT as u128 + 1 {
            native.keep(key, Token::from_u128(n), kept());
        }
        assert!(native.take(key, Token::from_u128(0)).is_none());
        let last = native.take(key, Token::from_u128(MAX_KEPT as u128));
        assert_eq!(last.map(|kept| kept.value), Some(vec![1]));
    }

    #[test]
    fn a_lease_past_its_end_is_not_live() {
        let native = Native::default();
        let key = RecordKey::new("s", "k");
        let (live, past) = (Token::from_u128(1), Token::from_u128(2));
        let now = Instant::now();
        let until = |at| Kept {
            value: vec![1],
            live_until: at,
            stepped: false,
        };
        native.keep(key, live, until(now + Duration::from_secs(60)));
        native.keep(key, past, until(now));
        assert_eq!(native.live(key, live), Some(vec![1]));
        assert_eq!(native.live(key, past), None);
        native.renewed(key, past, now + Duration::from_secs(60));
        assert_eq!(native.live(key, past), Some(vec![1]));
    }
}
