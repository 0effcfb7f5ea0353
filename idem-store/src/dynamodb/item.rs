//! A record's item: its attributes, how one is read back, and what a
//! caller's clock makes of it (free, held, lapsed, completed, a
//! tombstone), the same judgement in every condition and every read.

use std::collections::HashMap;
use std::time::Duration;

use aws_sdk_dynamodb::primitives::Blob;
use aws_sdk_dynamodb::types::AttributeValue;
use bytes::Bytes;
use idem_contract::StoreError;
use idem_contract::fingerprint::Fingerprint;
use idem_contract::store::{LAPSED_CLAIM_KEPT, Token};

use super::BACKEND;

/// An item as DynamoDB returns it.
pub(super) type Item = HashMap<String, AttributeValue>;

/// The state: `P` a claim, `C` a completed record (or its tombstone), `F`
/// a released claim, kept only for the steps it saved.
pub(super) const STATE: &str = "st";
pub(super) const TOKEN: &str = "tok";
pub(super) const FINGERPRINT: &str = "fp";
pub(super) const SITE: &str = "site";
/// When the claim was won, in milliseconds since the Unix epoch.
pub(super) const CREATED: &str = "created";
/// When the lease (a claim) or the TTL (a record) ends, in milliseconds.
pub(super) const EXPIRES: &str = "exp";
/// Until when the key stays taken: a lapsed claim a day past its lease,
/// a record until its tombstone (if any) ends. In milliseconds.
pub(super) const KEPT: &str = "kept";
/// The record's bytes; absent when empty or dropped by a purge.
pub(super) const RECORD: &str = "rec";
/// The tokens of the claims of this call that saved steps: a step item
/// counts only if its saver is one of them. Beside it, `sxt`: when the
/// last saved step expires (epoch seconds), a released item's TTL.
pub(super) const SAVERS: &str = "lt";
/// A step's value and its saver's token.
pub(super) const VALUE: &str = "v";
pub(super) const SAVER: &str = "tk";

pub(super) const PENDING: &str = "P";
pub(super) const COMPLETED: &str = "C";
pub(super) const RELEASED: &str = "F";

/// The sort key of a record's item; its steps sort under `step#`.
pub(super) const RECORD_SORT: &str = "record";
pub(super) const STEP_SORT: &str = "step#";

/// [`LAPSED_CLAIM_KEPT`] in milliseconds.
pub(super) const LAPSED_KEPT_MS: i64 = LAPSED_CLAIM_KEPT.as_millis() as i64;

/// A duration in whole milliseconds, rounded up, capped at 100 years.
pub(super) fn millis(duration: Duration) -> i64 {
    const CAP: u128 = 100 * 365 * 24 * 3600 * 1000;
    duration.as_nanos().div_ceil(1_000_000).min(CAP) as i64
}

pub(super) fn left(ms: i64) -> Duration {
    Duration::from_millis(ms.max(0) as u64)
}

pub(super) fn n(value: i64) -> AttributeValue {
    AttributeValue::N(value.to_string())
}

pub(super) fn b(bytes: &[u8]) -> AttributeValue {
    AttributeValue::B(Blob::new(bytes))
}

pub(super) fn s(text: &str) -> AttributeValue {
    AttributeValue::S(text.to_owned())
}

/// The TTL attribute's value for an item kept until `kept_ms`: whole
/// seconds, rounded up, plus `skew`, so DynamoDB's sweep never deletes
/// an item a caller whose clock runs behind still counts as live.
pub(super) fn ttl_secs(kept_ms: i64, skew: Duration) -> i64 {
    (kept_ms.saturating_add(millis(skew)) + 999).div_euclid(1000)
}

fn corrupt(what: &str) -> StoreError {
    StoreError::new(BACKEND, format!("a stored item has no valid `{what}`"))
}

pub(super) fn number(item: &Item, name: &str) -> Result<i64, StoreError> {
    item.get(name)
        .and_then(|v| v.as_n().ok())
        .and_then(|v| v.parse().ok())
        .ok_or_else(|| corrupt(name))
}

pub(super) fn bytes_of<'i>(item: &'i Item, name: &str) -> Option<&'i [u8]> {
    item.get(name).and_then(|v| v.as_b().ok()).map(Blob::as_ref)
}

pub(super) fn token_of(item: &Item, name: &str) -> Result<Token, StoreError> {
    let bytes: [u8; 16] = bytes_of(item, name)
        .and_then(|b| b.try_into().ok())
        .ok_or_else(|| corrupt(name))?;
    Ok(Token::from_u128(u128::from_be_bytes(bytes)))
}

/// A record's item, read.
#[derive(Debug, Clone)]
pub(super) struct Held {
    pub(super) state: State,
    pub(super) token: Token,
    pub(super) fingerprint: Fingerprint,
    pub(super) site: Option<String>,
    pub(super) created: i64,
    pub(super) expires: i64,
    pub(super) kept: i64,
    pub(super) record: Option<Bytes>,
    /// The tokens whose saved steps belong to this call.
    pub(super) savers: Vec<Token>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum State {
    Pending,
    Completed,
    Released,
}

impl Held {
    /// The record in `item`, if it holds one: an item of no state is no
    /// record (an endpoint may answer an absent item's `ALL_OLD` with its
    /// key alone, as dynoxide does).
    pub(super) fn read_some(item: Option<&Item>) -> Result<Option<Self>, StoreError> {
        match item {
            Some(item) if item.contains_key(STATE) => Self::read(item).map(Some),
            _ => Ok(None),
        }
    }

    pub(super) fn read(item: &Item) -> Result<Self, StoreError> {
        let state = match item
            .get(STATE)
            .and_then(|v| v.as_s().ok())
            .map(String::as_str)
        {
            Some(PENDING) => State::Pending,
            Some(COMPLETED) => State::Completed,
            Some(RELEASED) => State::Released,
            _ => return Err(corrupt(STATE)),
        };
        let fingerprint: [u8; 32] = bytes_of(item, FINGERPRINT)
            .and_then(|b| b.try_into().ok())
            .ok_or_else(|| corrupt(FINGERPRINT))?;
        let savers = match item.get(SAVERS).and_then(|v| v.as_bs().ok()) {
            Some(set) => set
                .iter()
                .map(|t| {
                    let t: [u8; 16] = t.as_ref().try_into().map_err(|_| corrupt(SAVERS))?;
                    Ok(Token::from_u128(u128::from_be_bytes(t)))
                })
                .collect::<Result<_, StoreError>>()?,
            None => Vec::new(),
        };
        Ok(Held {
            state,
            token: token_of(item, TOKEN)?,
            fingerprint: Fingerprint::from_bytes(fingerprint),
            site: item.get(SITE).and_then(|v| v.as_s().ok()).cloned(),
            created: number(item, CREATED)?,
            expires: number(item, EXPIRES)?,
            kept: number(item, KEPT)?,
            record: (state == State::Completed)
                .then(|| Bytes::copy_from_slice(bytes_of(item, RECORD).unwrap_or_default())),
            savers,
        })
    }

    /// Whether the key is free at `now`: a record whose TTL and tombstone
    /// ended, a claim lapsed longer than [`LAPSED_CLAIM_KEPT`], or a
    /// released claim. The claim's condition says the same
    /// (`claim::WINS`).
    pub(super) fn free(&self, now: i64) -> bool {
        self.state == State::Released || self.kept <= now
    }

    /// Whether another caller holds or completed the key at `now` (its
    /// lease, its record or its tombstone stands): what a fenced
    /// operation that found no claim of ours answers `Fence::Lost` for,
    /// and `Fence::Expired` otherwise.
    pub(super) fn live(&self, now: i64) -> bool {
        match self.state {
            State::Released => false,
            State::Pending => self.expires > now,
            State::Completed => self.kept > now,
        }
    }
}
