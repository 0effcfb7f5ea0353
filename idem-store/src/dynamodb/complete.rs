//! Completion, release and renewal: one `UpdateItem` each, fenced by a
//! condition on the claim's token and on its lease, which must have more
//! than the clock skew allowance left by the holder's clock. A failed
//! fence returns the item (`ALL_OLD`), which tells a takeover from an
//! expired claim without another request.

use std::time::Duration;

use aws_sdk_dynamodb::operation::update_item::UpdateItemError;
use aws_sdk_dynamodb::types::ReturnValuesOnConditionCheckFailure;
use idem_contract::StoreError;
use idem_contract::key::RecordKey;
use idem_contract::store::{Fence, Retention, Token};

use super::expr::Expr;
use super::item::{self, Held, Item, State, b, millis, n, s};
use super::{DynamoDbStore, MAX_RECORD_BYTES, err, now_ms, oversized};

/// The fence: the item is our claim and its lease has more than the skew
/// allowance left (`:until` is now plus the allowance).
pub(super) const HELD: &str = "#st = :p AND #tok = :tok AND #exp > :until";
/// A completion sent again: held, or our own completion landed (the item
/// keeps the completing claim's token, and the same record).
const HELD_OR_OURS: &str = "#st = :p AND #tok = :tok AND #exp > :until \
     OR #st = :c AND #tok = :tok AND #rec = :rec";
const HELD_OR_OURS_EMPTY: &str = "#st = :p AND #tok = :tok AND #exp > :until \
     OR #st = :c AND #tok = :tok AND attribute_not_exists(#rec)";

const COMPLETE: &str = "SET #st = :c, #rec = :rec, #exp = :exp, #kept = :kept, #ttl = :ttl \
     REMOVE #lt, #sxt";
/// An empty record is no attribute (DynamoDB keeps no empty binary in
/// some implementations); it reads back empty.
const COMPLETE_EMPTY: &str = "SET #st = :c, #exp = :exp, #kept = :kept, #ttl = :ttl \
     REMOVE #rec, #lt, #sxt";
/// A released claim stays, free, for as long as the steps it saved live,
/// so the next claim resumes them.
const RELEASE: &str = "SET #st = :f, #ttl = if_not_exists(#sxt, :nows)";
const RENEW: &str = "SET #exp = :exp, #kept = :kept, #ttl = :ttl";

impl DynamoDbStore {
    /// `Store::complete`, or `Store::complete_again` when `again`.
    pub(super) async fn complete_fenced(
        &self,
        key: &RecordKey,
        token: Token,
        record: &[u8],
        kept: Retention,
        again: bool,
    ) -> Result<Fence, StoreError> {
        if record.len() > MAX_RECORD_BYTES {
            return Err(oversized(format!(
                "a record of {} bytes is over DynamoDbStore's limit of {MAX_RECORD_BYTES}",
                record.len()
            )));
        }
        let now = now_ms();
        let expires = now.saturating_add(millis(kept.ttl));
        let until = now.saturating_add(millis(kept.kept_for()));
        let (update, fence) = match (record.is_empty(), again) {
            (true, false) => (COMPLETE_EMPTY, HELD),
            (true, true) => (COMPLETE_EMPTY, HELD_OR_OURS_EMPTY),
            (false, false) => (COMPLETE, HELD),
            (false, true) => (COMPLETE, HELD_OR_OURS),
        };
        let expr = Expr::new()
            .value("c", s(item::COMPLETED))
            .value("rec", b(record))
            .value("exp", n(expires))
            .value("kept", n(until))
            .value("ttl", n(item::ttl_secs(until, self.skew)));
        self.fenced(key, token, now, (update, fence), expr).await
    }

    /// `Store::release`.
    pub(super) async fn release_fenced(
        &self,
        key: &RecordKey,
        token: Token,
    ) -> Result<Fence, StoreError> {
        let now = now_ms();
        let expr = Expr::new()
            .value("f", s(item::RELEASED))
            .value("nows", n(now.div_euclid(1000)));
        self.fenced(key, token, now, (RELEASE, HELD), expr).await
    }

    /// `Store::renew`.
    pub(super) async fn renew_fenced(
        &self,
        key: &RecordKey,
        token: Token,
        lease: Duration,
    ) -> Result<Fence, StoreError> {
        let now = now_ms();
        let expires = now.saturating_add(millis(lease));
        let kept = expires.saturating_add(item::LAPSED_KEPT_MS);
        let expr = Expr::new()
            .value("exp", n(expires))
            .value("kept", n(kept))
            .value("ttl", n(item::ttl_secs(kept, self.skew)));
        self.fenced(key, token, now, (RENEW, HELD), expr).await
    }

    /// Sends `update` under `fence` ([`HELD`], or a completion's sent
    /// again), with `expr`'s values.
    async fn fenced(
        &self,
        key: &RecordKey,
        token: Token,
        now: i64,
        (update, fence): (&str, &str),
        expr: Expr,
    ) -> Result<Fence, StoreError> {
        let expr = self.fence_values(expr, token, now);
        let (names, values) = expr.bind(self, &[update, fence]);
        let sent = self
            .client
            .update_item()
            .table_name(&*self.table)
            .set_key(Some(self.record_key(key).into_iter().collect()))
            .update_expression(update)
            .condition_expression(fence)
            .set_expression_attribute_names(names)
            .set_expression_attribute_values(values)
            .return_values_on_condition_check_failure(ReturnValuesOnConditionCheckFailure::AllOld)
            .send()
            .await;
        match sent {
            Ok(_) => Ok(Fence::Held),
            Err(error) => match error.as_service_error() {
                Some(UpdateItemError::ConditionalCheckFailedException(failed)) => {
                    match failed.item().filter(|f| f.contains_key(item::STATE)) {
                        Some(found) => fence_of(Some(found), token, now),
                        // No item (none was there, or the endpoint
                        // returns none): read it.
                        None => fence_of(self.read(key).await?.item(), token, now),
                    }
                }
                _ => Err(err(error)),
            },
        }
    }

    /// `expr` with the values of [`HELD`].
    pub(super) fn fence_values(&self, expr: Expr, token: Token, now: i64) -> Expr {
        expr.value("p", s(item::PENDING))
            .value("tok", b(&token.to_bytes()))
            .value("until", n(now.saturating_add(millis(self.skew))))
    }
}

/// What a fenced write that failed tells: another caller holds or
/// completed the key (`Lost`), or nobody does (`Expired`: our claim's
/// lease ran out, or it was forgotten).
pub(super) fn fence_of(found: Option<&Item>, token: Token, now: i64) -> Result<Fence, StoreError> {
    let Some(held) = Held::read_some(found)? else {
        return Ok(Fence::Expired);
    };
    // Our own claim within the skew allowance of its end counts as ended.
    let ours = held.state == State::Pending && held.token == token;
    Ok(match held.live(now) && !ours {
        true => Fence::Lost,
        false => Fence::Expired,
    })
}
