//! What a DynamoDB client sends and what it costs: [`Meter`] counts the
//! requests (every attempt, retries included), asks for
//! `ReturnConsumedCapacity = TOTAL` on each and sums the capacity units
//! the answers report; [`item_bytes`] and the unit functions compute the
//! same units from item sizes by DynamoDB's published rules, for
//! endpoints that report them differently (or not at all).

#![allow(dead_code)]

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use aws_sdk_dynamodb::config::interceptors::{
    AfterDeserializationInterceptorContextRef, BeforeTransmitInterceptorContextMut,
};
use aws_sdk_dynamodb::config::{ConfigBag, Intercept, RuntimeComponents};
use aws_sdk_dynamodb::error::BoxError;
use aws_sdk_dynamodb::types::AttributeValue;
use aws_smithy_types::body::SdkBody;

/// The operations that take `ReturnConsumedCapacity`.
const ITEM_OPERATIONS: &[&str] = &[
    "GetItem",
    "PutItem",
    "UpdateItem",
    "DeleteItem",
    "Query",
    "Scan",
    "BatchGetItem",
    "BatchWriteItem",
    "TransactGetItems",
    "TransactWriteItems",
];

/// One request: its operation (`UpdateItem`, …) and the capacity units
/// its answer reported (`None`: the answer had no `ConsumedCapacity`, as
/// a failed condition's has none).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Sent {
    pub(crate) operation: String,
    pub(crate) units: Option<f64>,
}

/// The requests a client sent since the last [`take`](Meter::take).
#[derive(Debug, Clone, Default)]
pub(crate) struct Meter(Arc<Mutex<Vec<Sent>>>);

impl Meter {
    /// The requests sent since the last call, in order.
    pub(crate) fn take(&self) -> Vec<Sent> {
        std::mem::take(&mut *self.0.lock().unwrap_or_else(PoisonError::into_inner))
    }

    /// `client` with this meter on it.
    pub(crate) fn on(&self, client: &aws_sdk_dynamodb::Client) -> aws_sdk_dynamodb::Client {
        let config = client
            .config()
            .to_builder()
            .interceptor(self.clone())
            .build();
        aws_sdk_dynamodb::Client::from_conf(config)
    }
}

impl Intercept for Meter {
    fn name(&self) -> &'static str {
        "Meter"
    }

    /// Before signing (the signature covers the body): adds
    /// `"ReturnConsumedCapacity": "TOTAL"` to the JSON request, counts it.
    fn modify_before_signing(
        &self,
        context: &mut BeforeTransmitInterceptorContextMut<'_>,
        _: &RuntimeComponents,
        _: &mut ConfigBag,
    ) -> Result<(), BoxError> {
        let request = context.request_mut();
        let operation = request
            .headers()
            .get("x-amz-target")
            .and_then(|target| target.rsplit('.').next())
            .unwrap_or("?")
            .to_owned();
        let body = request.body().bytes().ok_or("a streaming request body")?;
        let mut json: serde_json::Value = serde_json::from_slice(body)?;
        let fields = json.as_object_mut().ok_or("a request that is no object")?;
        // The operations on items take it; those on tables do not.
        if ITEM_OPERATIONS.contains(&operation.as_str()) {
            fields.insert("ReturnConsumedCapacity".into(), "TOTAL".into());
        }
        let body = serde_json::to_vec(&json)?;
        request
            .headers_mut()
            .insert("content-length", body.len().to_string());
        *request.body_mut() = SdkBody::from(body);
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(Sent {
                operation,
                units: None,
            });
        Ok(())
    }

    /// The units the answer reports: one `ConsumedCapacity`, or a list of
    /// them (`TransactWriteItems`).
    fn read_after_deserialization(
        &self,
        context: &AfterDeserializationInterceptorContextRef<'_>,
        _: &RuntimeComponents,
        _: &mut ConfigBag,
    ) -> Result<(), BoxError> {
        let Some(body) = context.response().body().bytes() else {
            return Ok(());
        };
        let json: serde_json::Value = serde_json::from_slice(body).unwrap_or_default();
        let units = match json.get("ConsumedCapacity") {
            Some(serde_json::Value::Array(all)) => Some(all.iter().map(capacity_units).sum()),
            Some(one) => Some(capacity_units(one)),
            None => None,
        };
        if let Some(last) = self
            .0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .last_mut()
        {
            last.units = units;
        }
        Ok(())
    }
}

fn capacity_units(consumed: &serde_json::Value) -> f64 {
    consumed["CapacityUnits"].as_f64().unwrap_or(0.0)
}

/// An item's size by DynamoDB's rules: each attribute's name in UTF-8
/// bytes plus its value's size (a string's UTF-8 bytes, a binary's bytes,
/// a number's one byte per two significant digits plus one, a set's
/// members summed, a boolean or null one byte).
pub(crate) fn item_bytes(item: &HashMap<String, AttributeValue>) -> usize {
    item.iter()
        .map(|(name, value)| name.len() + value_bytes(value))
        .sum()
}

fn value_bytes(value: &AttributeValue) -> usize {
    match value {
        AttributeValue::S(text) => text.len(),
        AttributeValue::B(bytes) => bytes.as_ref().len(),
        AttributeValue::N(number) => {
            let digits: String = number.chars().filter(char::is_ascii_digit).collect();
            let significant = digits.trim_matches('0').len().max(1);
            significant.div_ceil(2) + 1
        }
        AttributeValue::Bs(set) => set.iter().map(|b| b.as_ref().len()).sum(),
        AttributeValue::Ss(set) => set.iter().map(String::len).sum(),
        AttributeValue::Bool(_) | AttributeValue::Null(_) => 1,
        other => panic!("no size rule here for {other:?}"),
    }
}

/// Write units of a write: the larger of the item before and after, 1 KB
/// a unit, rounded up, at least one. A write whose condition failed
/// consumes them too, by the larger of the item it found and the item it
/// would have written.
pub(crate) fn write_units(before: usize, after: usize) -> f64 {
    before.max(after).div_ceil(1024).max(1) as f64
}

/// Read units of a strongly consistent read: 4 KB a unit, rounded up.
pub(crate) fn read_units(bytes: usize) -> f64 {
    bytes.div_ceil(4096).max(1) as f64
}
