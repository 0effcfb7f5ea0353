//! A call's saved steps (`idem::step`): an item each beside the record,
//! under sort key `step#` + the step id in hex. A save is one
//! `TransactWriteItems`: the record's fence (which adds the saver's token
//! to the call's savers) and the step's item, atomically. A step counts
//! only while it lives and if its saver is one of the call's savers: a new
//! call under the key (after a completion, a rerun) starts with none, so
//! it never resumes an older call's steps.

use std::time::Duration;

use aws_sdk_dynamodb::operation::get_item::GetItemOutput;
use aws_sdk_dynamodb::operation::transact_write_items::TransactWriteItemsError;
use aws_sdk_dynamodb::operation::update_item::UpdateItemError;
use aws_sdk_dynamodb::primitives::Blob;
use aws_sdk_dynamodb::types::{
    AttributeValue, DeleteRequest, Put, ReturnValuesOnConditionCheckFailure, TransactWriteItem,
    Update, WriteRequest,
};
use bytes::Bytes;
use idem_contract::StoreError;
use idem_contract::key::RecordKey;
use idem_contract::store::{Claim, Fence, StepId, Token};

use super::complete::{HELD, fence_of};
use super::expr::Expr;
use super::item::{self, Item, b, millis, n, s};
use super::{BACKEND, DynamoDbStore, MAX_RECORD_BYTES, err, now_ms, oversized};

/// Adds the saver to the call's savers; the released item's TTL follows
/// the last step's.
const SAVED: &str = "SET #sxt = :sxt ADD #lt :savers";
const STEPS: &str = "#pk = :pk AND begins_with(#sk, :step)";
const FORGET_SAVERS: &str = "REMOVE #lt, #sxt";
const OURS: &str = "#tok = :tok";

/// Items a `BatchWriteItem` takes at most.
const BATCH: usize = 25;

impl DynamoDbStore {
    /// `Store::save_step`.
    pub(super) async fn save_step_fenced(
        &self,
        key: &RecordKey,
        token: Token,
        step: StepId,
        value: &[u8],
        ttl: Duration,
    ) -> Result<Fence, StoreError> {
        if value.len() > MAX_RECORD_BYTES {
            return Err(oversized(format!(
                "a step's value of {} bytes is over DynamoDbStore's limit of {MAX_RECORD_BYTES}",
                value.len()
            )));
        }
        let now = now_ms();
        let expires = now.saturating_add(millis(ttl));
        let ttl_secs = item::ttl_secs(expires, self.skew);
        let expr = self
            .fence_values(Expr::new(), token, now)
            .value("sxt", n(ttl_secs))
            .value(
                "savers",
                AttributeValue::Bs(vec![Blob::new(token.to_bytes())]),
            );
        let (names, values) = expr.bind(self, &[SAVED, HELD]);
        let fence = Update::builder()
            .table_name(&*self.table)
            .set_key(Some(self.record_key(key).into_iter().collect()))
            .update_expression(SAVED)
            .condition_expression(HELD)
            .set_expression_attribute_names(names)
            .set_expression_attribute_values(values)
            .return_values_on_condition_check_failure(ReturnValuesOnConditionCheckFailure::AllOld)
            .build()
            .map_err(|e| StoreError::new(BACKEND, e))?;
        let put = Put::builder()
            .table_name(&*self.table)
            .item(&*self.partition_key, self.pk(key))
            .item(&*self.sort_key, s(&step_sort(step)))
            .item(item::VALUE, b(value))
            .item(item::EXPIRES, n(expires))
            .item(item::SAVER, b(&token.to_bytes()))
            .item(&*self.ttl_attribute, n(ttl_secs))
            .build()
            .map_err(|e| StoreError::new(BACKEND, e))?;
        let sent = self
            .client
            .transact_write_items()
            .transact_items(TransactWriteItem::builder().update(fence).build())
            .transact_items(TransactWriteItem::builder().put(put).build())
            .send()
            .await;
        let error = match sent {
            Ok(_) => return Ok(Fence::Held),
            Err(error) => error,
        };
        let Some(TransactWriteItemsError::TransactionCanceledException(cancelled)) =
            error.as_service_error()
        else {
            return Err(err(error));
        };
        let fenced = cancelled.cancellation_reasons().first();
        if fenced.and_then(|r| r.code()) != Some("ConditionalCheckFailed") {
            return Err(err(error));
        }
        match fenced
            .and_then(|r| r.item())
            .filter(|f| f.contains_key(item::STATE))
        {
            Some(found) => fence_of(Some(found), token, now),
            // An endpoint that returns no item with the reason: read it.
            None => fence_of(self.read(key).await?.item(), token, now),
        }
    }

    /// The record's item, read consistently.
    pub(super) async fn read(&self, key: &RecordKey) -> Result<GetItemOutput, StoreError> {
        self.client
            .get_item()
            .table_name(&*self.table)
            .set_key(Some(self.record_key(key).into_iter().collect()))
            .consistent_read(true)
            .send()
            .await
            .map_err(err)
    }

    /// The live steps under `key` saved by one of `savers`.
    pub(super) async fn load_steps(
        &self,
        key: &RecordKey,
        savers: &[Token],
        now: i64,
    ) -> Result<Vec<(StepId, Bytes)>, StoreError> {
        let mut steps = Vec::new();
        for found in self.step_items(key).await? {
            let live = item::number(&found, item::EXPIRES)? > now;
            if !live || !savers.contains(&item::token_of(&found, item::SAVER)?) {
                continue;
            }
            let sort = found.get(&*self.sort_key).and_then(|v| v.as_s().ok());
            let id = sort.and_then(|sk| step_id(sk)).ok_or_else(|| {
                StoreError::new(
                    BACKEND,
                    "a stored step's sort key is not step# and 32 hex digits",
                )
            })?;
            let value = item::bytes_of(&found, item::VALUE).unwrap_or_default();
            steps.push((id, Bytes::copy_from_slice(value)));
        }
        Ok(steps)
    }

    /// Every step item under `key`, read consistently, page by page.
    async fn step_items(&self, key: &RecordKey) -> Result<Vec<Item>, StoreError> {
        let expr = Expr::new()
            .value("pk", self.pk(key))
            .value("step", s(item::STEP_SORT));
        let (names, values) = expr.bind(self, &[STEPS]);
        self.client
            .query()
            .table_name(&*self.table)
            .key_condition_expression(STEPS)
            .set_expression_attribute_names(names)
            .set_expression_attribute_values(values)
            .consistent_read(true)
            .into_paginator()
            .items()
            .send()
            .try_collect()
            .await
            .map_err(err)
    }

    /// Drops a claim's savers: a new call under the key won it.
    pub(super) async fn forget_savers(
        &self,
        key: &RecordKey,
        claim: &Claim,
    ) -> Result<(), StoreError> {
        let expr = Expr::new().value("tok", b(&claim.token.to_bytes()));
        let (names, values) = expr.bind(self, &[FORGET_SAVERS, OURS]);
        let sent = self
            .client
            .update_item()
            .table_name(&*self.table)
            .set_key(Some(self.record_key(key).into_iter().collect()))
            .update_expression(FORGET_SAVERS)
            .condition_expression(OURS)
            .set_expression_attribute_names(names)
            .set_expression_attribute_values(values)
            .send()
            .await;
        match sent {
            // Already forgotten or taken over: no savers of ours to drop.
            Err(e)
                if matches!(
                    e.as_service_error(),
                    Some(UpdateItemError::ConditionalCheckFailedException(_))
                ) =>
            {
                Ok(())
            }
            other => other.map(drop).map_err(err),
        }
    }

    /// Deletes every step item under `key`; how many.
    pub(super) async fn delete_steps(&self, key: &RecordKey) -> Result<u64, StoreError> {
        let keys: Vec<Item> = self
            .step_items(key)
            .await?
            .into_iter()
            .map(|found| {
                found
                    .into_iter()
                    .filter(|(name, _)| *name == *self.partition_key || *name == *self.sort_key)
                    .collect()
            })
            .collect();
        self.delete_items(keys).await
    }

    /// Deletes the items of `keys`, 25 to a request; how many.
    pub(super) async fn delete_items(&self, keys: Vec<Item>) -> Result<u64, StoreError> {
        let count = keys.len() as u64;
        for chunk in keys.chunks(BATCH) {
            let mut requests: Vec<WriteRequest> = chunk
                .iter()
                .map(|k| {
                    let delete = DeleteRequest::builder().set_key(Some(k.clone())).build();
                    delete.map(|d| WriteRequest::builder().delete_request(d).build())
                })
                .collect::<Result<_, _>>()
                .map_err(|e| StoreError::new(BACKEND, e))?;
            // Unprocessed requests (throttling) are sent again, a few times.
            for _ in 0..8 {
                let out = self
                    .client
                    .batch_write_item()
                    .request_items(&*self.table, requests)
                    .send()
                    .await
                    .map_err(err)?;
                requests = out
                    .unprocessed_items()
                    .and_then(|left| left.get(&*self.table))
                    .cloned()
                    .unwrap_or_default();
                if requests.is_empty() {
                    break;
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            if !requests.is_empty() {
                return Err(StoreError::new(
                    BACKEND,
                    "deletes left unprocessed after 8 tries",
                ));
            }
        }
        Ok(count)
    }
}

fn step_sort(step: StepId) -> String {
    format!("{}{}", item::STEP_SORT, key_hex(step.as_bytes()))
}

fn key_hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn step_id(sort: &str) -> Option<StepId> {
    let hex = sort.strip_prefix(item::STEP_SORT)?;
    let mut id = [0u8; 16];
    if hex.len() != 32 {
        return None;
    }
    for (i, byte) in id.iter_mut().enumerate() {
        *byte = u8::from_str_radix(hex.get(2 * i..2 * i + 2)?, 16).ok()?;
    }
    Some(StepId::from_bytes(id))
}

#[cfg(test)]
mod tests {
    use idem_contract::store::StepId;

    #[test]
    fn a_step_id_survives_its_sort_key() {
        let id = StepId::new(&("line", 3u32));
        assert_eq!(super::step_id(&super::step_sort(id)), Some(id));
        assert_eq!(super::step_id("step#zz"), None);
    }
}
