//! The claim: one conditional `UpdateItem` that wins a free, released or
//! expired key, takes over a lapsed claim of the same payload, or (for a
//! rerun) replaces a record of another payload, and otherwise returns
//! the item it found (`ALL_OLD`), which answers the call: the record, the
//! holder, or the tombstone.

use std::time::Duration;

use aws_sdk_dynamodb::operation::update_item::UpdateItemError;
use aws_sdk_dynamodb::types::{ReturnValue, ReturnValuesOnConditionCheckFailure};
use idem_contract::StoreError;
use idem_contract::fingerprint::Fingerprint;
use idem_contract::key::RecordKey;
use idem_contract::store::{Claim, ClaimOutcome};

use super::expr::Expr;
use super::item::{self, Held, State, b, left, millis, n, s};
use super::{BACKEND, DynamoDbStore, err, now_ms};

/// Sets the item to a fresh claim; the call's savers and steps' TTL stay
/// (a resumed call's steps), the record goes.
const SET: &str = "SET #st = :p, #tok = :tok, #fp = :fp, #site = :site, #created = :now, \
     #exp = :exp, #kept = :kept, #ttl = :ttl REMOVE #rec";

/// The key is free (no item; a record whose TTL and tombstone ended, a
/// claim lapsed for a day; a released claim), or our own claim, or a
/// lapsed claim `Held::free` and the classification below agree with.
const WINS: &str = "attribute_not_exists(#st) OR #kept <= :now OR #st = :f \
     OR (#st = :p AND (#tok = :tok OR (#exp <= :now";
/// … of our payload (a claim without a fingerprint takes over any).
const OF_OUR_PAYLOAD: &str = " AND #fp IN (:fp, :none)";
/// … and, for a rerun, a record or tombstone of another payload.
const OR_REPLACES: &str = " OR (#st = :c AND #fp <> :fp AND #fp <> :none)";

/// Rounds a claim may take when the item changes under it in a way its
/// answer cannot explain (never, by the conditions; a bound, not a loop).
const ROUNDS: usize = 4;

impl DynamoDbStore {
    /// `Store::claim`.
    pub(super) async fn claim_key(
        &self,
        key: &RecordKey,
        claim: &Claim,
    ) -> Result<ClaimOutcome, StoreError> {
        for _ in 0..ROUNDS {
            let now = now_ms();
            match self.try_claim(key, claim, now).await? {
                Ok(old) => return self.won(key, claim, old, now).await,
                Err(found) => {
                    // Times left count from the answer: a slow answer
                    // does not lengthen them.
                    let answered = now_ms().max(now);
                    if let Some(answer) = answer(claim, &found, now, answered) {
                        return Ok(answer);
                    }
                }
            }
        }
        Err(StoreError::new(
            BACKEND,
            "the claim did not settle: the item changed in ways its answers did not explain",
        ))
    }

    /// The claim's one write: `Ok` with the item it replaced (if any), or
    /// `Err` with the item that stood in its way.
    async fn try_claim(
        &self,
        key: &RecordKey,
        claim: &Claim,
        now: i64,
    ) -> Result<Result<Option<Held>, Held>, StoreError> {
        let expires = now.saturating_add(millis(claim.lease));
        let kept = expires.saturating_add(item::LAPSED_KEPT_MS);
        let mut condition = WINS.to_owned();
        if claim.fingerprint != Fingerprint::NONE {
            condition.push_str(OF_OUR_PAYLOAD);
        }
        condition.push_str(")))");
        if claim.rerun && claim.fingerprint != Fingerprint::NONE {
            condition.push_str(OR_REPLACES);
        }
        let expr = Expr::new()
            .value("p", s(item::PENDING))
            .value("c", s(item::COMPLETED))
            .value("f", s(item::RELEASED))
            .value("tok", b(&claim.token.to_bytes()))
            .value("fp", b(claim.fingerprint.as_bytes()))
            .value("none", b(Fingerprint::NONE.as_bytes()))
            .value("site", s(claim.site))
            .value("now", n(now))
            .value("exp", n(expires))
            .value("kept", n(kept))
            .value("ttl", n(item::ttl_secs(kept, self.skew)));
        let (names, values) = expr.bind(self, &[SET, &condition]);
        let sent = self
            .client
            .update_item()
            .table_name(&*self.table)
            .set_key(Some(self.record_key(key).into_iter().collect()))
            .update_expression(SET)
            .condition_expression(condition)
            .set_expression_attribute_names(names)
            .set_expression_attribute_values(values)
            .return_values(ReturnValue::AllOld)
            .return_values_on_condition_check_failure(ReturnValuesOnConditionCheckFailure::AllOld)
            .send()
            .await;
        match sent {
            Ok(out) => Ok(Ok(Held::read_some(out.attributes.as_ref())?)),
            Err(error) => match error.as_service_error() {
                Some(UpdateItemError::ConditionalCheckFailedException(failed)) => {
                    let found = Held::read_some(failed.item())?.ok_or_else(no_item)?;
                    Ok(Err(found))
                }
                _ => Err(err(error)),
            },
        }
    }

    /// The answer to a won claim that replaced `old`: whether it took over
    /// a lapsed claim, and the steps of the call it resumes.
    async fn won(
        &self,
        key: &RecordKey,
        claim: &Claim,
        old: Option<Held>,
        now: i64,
    ) -> Result<ClaimOutcome, StoreError> {
        let Some(old) = old else {
            return Ok(ClaimOutcome::won(false, Vec::new()));
        };
        // A released claim, our own, or a lapsed one: the same call,
        // resumed with its steps.
        let resumed =
            old.state == State::Released || (old.state == State::Pending && old.kept > now);
        if !resumed {
            // A new call: the old one's savers (a claim lapsed for a day)
            // must not lend it their steps.
            if !old.savers.is_empty() {
                self.forget_savers(key, claim).await?;
            }
            return Ok(ClaimOutcome::won(false, Vec::new()));
        }
        let took_over = old.state == State::Pending && old.expires <= now;
        let steps = match old.savers.is_empty() {
            true => Vec::new(),
            false => self.load_steps(key, &old.savers, now).await?,
        };
        Ok(ClaimOutcome::won(took_over, steps))
    }
}

/// What a claim sent at `now` that did not win answers, from the item in
/// its way, with the times left as of `answered`; `None` when the item
/// would have let it win (it changed meanwhile: try again).
fn answer(claim: &Claim, found: &Held, now: i64, answered: i64) -> Option<ClaimOutcome> {
    let other = !claim.fingerprint.matches(&found.fingerprint);
    match found.state {
        State::Released => None,
        _ if found.free(now) => None,
        State::Completed if claim.rerun && other => None,
        State::Completed if found.expires > now => Some(ClaimOutcome::completed(
            found.fingerprint,
            found.record.clone().unwrap_or_default(),
            left(found.expires - answered),
        )),
        State::Completed => Some(ClaimOutcome::expired(
            found.fingerprint,
            left(now - found.expires),
        )),
        State::Pending if found.token == claim.token => None,
        State::Pending if found.expires > now => Some(ClaimOutcome::in_progress(
            found.fingerprint,
            left(found.expires - answered),
        )),
        // A lapsed claim of another payload: a mismatch, with no time left.
        State::Pending if other => {
            Some(ClaimOutcome::in_progress(found.fingerprint, Duration::ZERO))
        }
        State::Pending => None,
    }
}

fn no_item() -> StoreError {
    StoreError::new(
        BACKEND,
        "a failed condition returned no item: the endpoint ignores ReturnValuesOnConditionCheckFailure = ALL_OLD",
    )
}
