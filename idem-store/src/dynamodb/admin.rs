//! [`Admin`] for [`DynamoDbStore`], and `forget`. DynamoDB has no
//! secondary order or count, so `list`, `purge` and `stats` `Scan` the
//! table (the items under the store's prefix), page by page: their cost
//! grows with the table, for an operator's occasional use, not a
//! service's hot path. `inspect` is one `GetItem`.

use aws_sdk_dynamodb::operation::delete_item::DeleteItemError;
use aws_sdk_dynamodb::operation::update_item::UpdateItemError;
use idem_contract::StoreError;
use idem_contract::admin::{Admin, ListFilter, Purged, RecordInfo, RecordState, Stats};
use idem_contract::key::RecordKey;
use idem_contract::store::async_trait;

use super::expr::Expr;
use super::item::{self, Held, Item, State, b, left, s};
use super::{BACKEND, DynamoDbStore, err, now_ms};

const UNDER_PREFIX: &str = "begins_with(#pk, :prefix)";
/// A purge deletes an item only as it saw it.
const AS_SEEN: &str = "#tok = :tok AND #st = :st";
const COMPACT: &str = "REMOVE #rec";

impl DynamoDbStore {
    /// `Store::forget`.
    pub(super) async fn forget_key(&self, key: &RecordKey) -> Result<(), StoreError> {
        self.client
            .delete_item()
            .table_name(&*self.table)
            .set_key(Some(self.record_key(key).into_iter().collect()))
            .send()
            .await
            .map_err(err)?;
        self.delete_steps(key).await.map(drop)
    }

    /// Every item under the store's prefix, records and steps (the SDK's
    /// paginator follows `LastEvaluatedKey`).
    async fn scan(&self) -> Result<Vec<Item>, StoreError> {
        let expr = Expr::new().value("prefix", s(&self.prefix));
        let (names, values) = expr.bind(self, &[UNDER_PREFIX]);
        self.client
            .scan()
            .table_name(&*self.table)
            .filter_expression(UNDER_PREFIX)
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

    /// The records under the prefix (released claims, which hold no
    /// record, left out), with their keys.
    async fn records(&self) -> Result<Vec<(RecordKey, Held)>, StoreError> {
        let mut records = Vec::new();
        for found in self.scan().await? {
            if !self.is_record(&found) {
                continue;
            }
            let held = Held::read(&found)?;
            if held.state != State::Released {
                records.push((self.key_of(&found)?, held));
            }
        }
        Ok(records)
    }

    fn is_record(&self, found: &Item) -> bool {
        let sort = found.get(&*self.sort_key).and_then(|v| v.as_s().ok());
        sort.is_some_and(|sk| sk == item::RECORD_SORT)
    }

    /// The hashed key of an item, from its partition key.
    fn key_of(&self, found: &Item) -> Result<RecordKey, StoreError> {
        let bad = || {
            StoreError::new(
                BACKEND,
                "an item's partition key is not the prefix and 64 hex digits",
            )
        };
        let pk = found
            .get(&*self.partition_key)
            .and_then(|v| v.as_s().ok())
            .ok_or_else(bad)?;
        let hex = pk
            .strip_prefix(&*self.prefix)
            .filter(|h| h.len() == 64)
            .ok_or_else(bad)?;
        let mut key = [0u8; 32];
        for (i, byte) in key.iter_mut().enumerate() {
            *byte = u8::from_str_radix(&hex[2 * i..2 * i + 2], 16).map_err(|_| bad())?;
        }
        Ok(RecordKey::from_bytes(key))
    }

    /// Deletes (or, for `COMPACT`, updates) the item of `key` if it is
    /// still as `held` was; whether it was.
    async fn purge_one(
        &self,
        key: &RecordKey,
        held: &Held,
        compact: bool,
    ) -> Result<bool, StoreError> {
        let state = match held.state {
            State::Pending => item::PENDING,
            State::Completed => item::COMPLETED,
            State::Released => item::RELEASED,
        };
        let expr = Expr::new()
            .value("tok", b(&held.token.to_bytes()))
            .value("st", s(state));
        let record_key = Some(self.record_key(key).into_iter().collect());
        if compact {
            let (names, values) = expr.bind(self, &[COMPACT, AS_SEEN]);
            let sent = self
                .client
                .update_item()
                .table_name(&*self.table)
                .set_key(record_key)
                .update_expression(COMPACT)
                .condition_expression(AS_SEEN)
                .set_expression_attribute_names(names)
                .set_expression_attribute_values(values)
                .send()
                .await;
            return match sent {
                Ok(_) => Ok(true),
                Err(e)
                    if matches!(
                        e.as_service_error(),
                        Some(UpdateItemError::ConditionalCheckFailedException(_))
                    ) =>
                {
                    Ok(false)
                }
                Err(e) => Err(err(e)),
            };
        }
        let (names, values) = expr.bind(self, &[AS_SEEN]);
        let sent = self
            .client
            .delete_item()
            .table_name(&*self.table)
            .set_key(record_key)
            .condition_expression(AS_SEEN)
            .set_expression_attribute_names(names)
            .set_expression_attribute_values(values)
            .send()
            .await;
        match sent {
            Ok(_) => Ok(true),
            Err(e)
                if matches!(
                    e.as_service_error(),
                    Some(DeleteItemError::ConditionalCheckFailedException(_))
                ) =>
            {
                Ok(false)
            }
            Err(e) => Err(err(e)),
        }
    }
}

/// What an operator sees of `held` at `now`.
fn info(key: RecordKey, held: Held, now: i64) -> RecordInfo {
    let state = state_of(&held, now);
    let mut info = RecordInfo::new(key, state, held.fingerprint);
    info.site = held.site;
    info.age = left(now - held.created);
    info.expires_in = match state {
        RecordState::Tombstone => Some(left(held.kept - now)),
        RecordState::InProgress | RecordState::Completed => Some(left(held.expires - now)),
        _ => None,
    };
    info.size = held.record.as_ref().map_or(0, |r| r.len());
    info.record = held.record;
    info
}

fn state_of(held: &Held, now: i64) -> RecordState {
    let in_progress = held.state == State::Pending;
    RecordState::of_row(
        held.expires > now,
        in_progress,
        !in_progress && held.kept > now,
    )
}

#[async_trait]
impl Admin for DynamoDbStore {
    async fn list(&self, filter: &ListFilter) -> Result<Vec<RecordInfo>, StoreError> {
        let now = now_ms();
        let mut found: Vec<_> = self
            .records()
            .await?
            .into_iter()
            .filter(|(_, held)| {
                !filter.in_progress || state_of(held, now) == RecordState::InProgress
            })
            .filter(|(_, held)| {
                filter
                    .older_than
                    .is_none_or(|age| now - held.created >= item::millis(age))
            })
            .collect();
        found.sort_by(|(a, x), (b, y)| (x.created, a.as_bytes()).cmp(&(y.created, b.as_bytes())));
        found.truncate(filter.limit.unwrap_or(usize::MAX));
        Ok(found
            .into_iter()
            .map(|(key, held)| info(key, held, now))
            .collect())
    }

    async fn inspect(&self, key: &RecordKey) -> Result<Option<RecordInfo>, StoreError> {
        let now = now_ms();
        let Some(found) = self.read(key).await?.item else {
            return Ok(None);
        };
        let held = Held::read(&found)?;
        Ok((held.state != State::Released).then(|| info(*key, held, now)))
    }

    async fn purge(&self) -> Result<Purged, StoreError> {
        let now = now_ms();
        let mut purged = Purged::default();
        let mut steps = Vec::new();
        for found in self.scan().await? {
            if !self.is_record(&found) {
                if item::number(&found, item::EXPIRES)? <= now {
                    let key = |name: &str| found.get(name).map(|v| (name.to_owned(), v.clone()));
                    steps.extend(
                        key(&self.partition_key)
                            .zip(key(&self.sort_key))
                            .map(|(p, s)| Item::from([p, s])),
                    );
                }
                continue;
            }
            let (key, held) = (self.key_of(&found)?, Held::read(&found)?);
            let ttl_ms = item::number(&found, &self.ttl_attribute)
                .unwrap_or(i64::MAX / 1000)
                .saturating_mul(1000);
            match held.state {
                State::Released if ttl_ms <= now => {
                    self.purge_one(&key, &held, false).await?;
                }
                State::Released => {}
                _ if held.kept <= now => {
                    purged.records += u64::from(self.purge_one(&key, &held, false).await?)
                }
                State::Completed
                    if held.expires <= now
                        && held.record.as_ref().is_some_and(|r| !r.is_empty()) =>
                {
                    purged.tombstones += u64::from(self.purge_one(&key, &held, true).await?);
                }
                _ => {}
            }
        }
        purged.steps = self.delete_items(steps).await?;
        Ok(purged)
    }

    async fn stats(&self) -> Result<Stats, StoreError> {
        let now = now_ms();
        let mut stats = Stats::default();
        for (_, held) in self.records().await? {
            match state_of(&held, now) {
                RecordState::InProgress => stats.in_progress += 1,
                RecordState::Completed => stats.completed += 1,
                RecordState::Lapsed => stats.lapsed += 1,
                RecordState::Tombstone => stats.tombstones += 1,
                _ => stats.expired += 1,
            }
            stats.bytes += held.record.as_ref().map_or(0, |r| r.len() as u64);
        }
        Ok(stats)
    }
}
