//! Requests and capacity units per call on `DynamoDbStore`, beside the
//! same conditional writes by hand (the protocol of AWS Powertools'
//! idempotency utility: a conditional `PutItem` that claims, returning
//! the item in its way with `ReturnValuesOnConditionCheckFailure =
//! ALL_OLD`, then an `UpdateItem` with the result), on dynoxide and moto.
//! Prints a table per implementation and record size (BENCHMARKS.md,
//! "DynamoDB"):
//!
//! ```sh
//! cargo test -p idem-integration --test all dynamodb_capacity -- --nocapture --test-threads 1
//! ```
//!
//! Units are shown twice: as the endpoint reported them
//! (`ReturnConsumedCapacity = TOTAL` on every request, see
//! `support/dynamodb_meter.rs`), and computed from the items' sizes by
//! DynamoDB's rules, since an emulator may count differently and no
//! endpoint reports the units a failed condition consumed.

use std::collections::HashMap;
use std::sync::Mutex;

use aws_sdk_dynamodb::operation::put_item::PutItemError;
use aws_sdk_dynamodb::types::{AttributeValue, ReturnValuesOnConditionCheckFailure};
use idem::fingerprint::Fingerprint;
use idem::key::RecordKey;
use idem::store::{Claim, Token};
use idem::{DynamoDbStore, Error, Idempotency, Store};
use serde::Serialize;

use crate::support::dynamodb_meter::{Meter, Sent, item_bytes, write_units};
use crate::support::dynamodb_server::{self, Emulator};

/// A lease no slow emulator outlasts within one case.
const LEASE: std::time::Duration = std::time::Duration::from_secs(120);

#[derive(Debug, Clone, PartialEq, Serialize, serde::Deserialize)]
struct Receipt {
    order: String,
    cents: u64,
    note: String,
}

fn receipt(note_bytes: usize) -> Receipt {
    Receipt {
        order: "o-1".to_owned(),
        cents: 1200,
        note: "n".repeat(note_bytes),
    }
}

/// One kind of call, measured.
#[derive(Debug)]
struct Row {
    protocol: &'static str,
    call: &'static str,
    sent: Vec<Sent>,
    /// Write units by the rules, from the sizes of the items it touched.
    by_rule: f64,
    /// The size of the item the call left (or found), in bytes.
    item: usize,
}

impl Row {
    fn operations(&self) -> Vec<&str> {
        self.sent.iter().map(|s| s.operation.as_str()).collect()
    }

    /// The units the endpoint reported, if it reported any.
    fn reported(&self) -> Option<f64> {
        let reported: Vec<f64> = self.sent.iter().filter_map(|s| s.units).collect();
        (!reported.is_empty()).then(|| reported.iter().sum())
    }
}

/// A new table on `emulator`: its name, a metered client and a plain one
/// (for reading items' sizes unmetered).
async fn table(emulator: Emulator, meter: &Meter) -> (String, aws_sdk_dynamodb::Client) {
    let url = dynamodb_server::url(emulator).await;
    let plain = dynamodb_server::client(&url);
    let table = format!("idem-cu-{:x}", Token::random().to_u128() as u64);
    DynamoDbStore::new(meter.on(&plain), &table)
        .create_table()
        .await
        .expect("create the table");
    meter.take();
    (table, plain)
}

/// The size of the record item under `pk`, read strongly consistent.
async fn size(client: &aws_sdk_dynamodb::Client, table: &str, pk: &str) -> usize {
    let item = client
        .get_item()
        .table_name(table)
        .key("pk", AttributeValue::S(pk.to_owned()))
        .key("sk", AttributeValue::S("record".to_owned()))
        .consistent_read(true)
        .send()
        .await
        .expect("read the item")
        .item
        .expect("an item");
    item_bytes(&item)
}

/// The four calls through idem: fresh, replay, mismatch, in progress.
async fn through_idem(emulator: Emulator, value: &Receipt) -> Vec<Row> {
    let meter = Meter::default();
    let (table, plain) = table(emulator, &meter).await;
    let store = DynamoDbStore::new(meter.on(&plain), &table);
    let idem = Idempotency::new(store.clone());
    let key = RecordKey::new("orders", "o-1");
    let pk = store.partition_key(&key);
    let claimed = Mutex::new(0);
    let call = |value: Receipt| {
        let (claimed, plain, table, pk, idem) = (&claimed, &plain, &table, &pk, &idem);
        let payload = value.clone();
        async move {
            idem.call("orders", "o-1")
                .fingerprint(&payload)
                .lease(LEASE)
                .run(|| async move {
                    *claimed.lock().unwrap() = size(plain, table, pk).await;
                    Ok::<_, Error>(value)
                })
                .await
        }
    };
    assert_eq!(&call(value.clone()).await.unwrap(), value);
    let sent = meter.take();
    let claim = *claimed.lock().unwrap();
    let done = size(&plain, &table, &pk).await;
    let mut rows = vec![Row {
        protocol: "idem",
        call: "fresh",
        sent,
        by_rule: write_units(0, claim) + write_units(claim, done),
        item: done,
    }];
    assert_eq!(&call(value.clone()).await.unwrap(), value);
    rows.push(failed("idem", "replay", meter.take(), done));
    let mut other = value.clone();
    other.cents += 1;
    let mismatch = call(other).await;
    assert!(
        matches!(mismatch, Err(Error::FingerprintMismatch { .. })),
        "{mismatch:?}"
    );
    rows.push(failed("idem", "mismatch", meter.take(), done));
    let busy = RecordKey::new("orders", "o-2");
    let held = Claim::new(Token::random(), Fingerprint::NONE, LEASE, "capacity");
    store.claim(&busy, &held).await.unwrap();
    meter.take();
    let pending = size(&plain, &table, &store.partition_key(&busy)).await;
    let out = idem
        .call("orders", "o-2")
        .run(|| async { Ok::<_, Error>(value.clone()) })
        .await;
    assert!(matches!(out, Err(Error::InProgress { .. })), "{out:?}");
    rows.push(failed("idem", "in progress", meter.take(), pending));
    rows
}

/// A call that ended at a failed condition on an item of `item` bytes
/// (the larger: the write would have made a claim's item, smaller than a
/// record's and the size of another claim's).
fn failed(protocol: &'static str, call: &'static str, sent: Vec<Sent>, item: usize) -> Row {
    Row {
        protocol,
        call,
        sent,
        by_rule: write_units(item, 0),
        item,
    }
}

/// Powertools' protocol by hand, on one table: the item's attributes
/// named as Powertools names them.
struct ByHand {
    client: aws_sdk_dynamodb::Client,
    table: String,
}

/// What the claim of [`ByHand`] found.
enum Found {
    Won,
    Completed { data: String, validation: String },
    InProgress,
}

impl ByHand {
    fn key(&self, pk: &str) -> HashMap<String, AttributeValue> {
        HashMap::from([
            ("pk".to_owned(), AttributeValue::S(pk.to_owned())),
            ("sk".to_owned(), AttributeValue::S("record".to_owned())),
        ])
    }

    async fn claim(&self, pk: &str, validation: &str) -> Found {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap();
        let n = |v: u128| AttributeValue::N(v.to_string());
        let mut item = self.key(pk);
        item.extend([
            ("status".to_owned(), AttributeValue::S("INPROGRESS".into())),
            ("expiration".to_owned(), n(now.as_secs() as u128 + 3600)),
            (
                "in_progress_expiration".to_owned(),
                n(now.as_millis() + LEASE.as_millis()),
            ),
            (
                "validation".to_owned(),
                AttributeValue::S(validation.into()),
            ),
        ]);
        let sent = self
            .client
            .put_item()
            .table_name(&self.table)
            .set_item(Some(item))
            .condition_expression(
                "attribute_not_exists(pk) OR expiration < :now OR \
                 (#s = :inprogress AND attribute_exists(in_progress_expiration) \
                 AND in_progress_expiration < :now_ms)",
            )
            .expression_attribute_names("#s", "status")
            .expression_attribute_values(":now", n(now.as_secs() as u128))
            .expression_attribute_values(":now_ms", n(now.as_millis()))
            .expression_attribute_values(":inprogress", AttributeValue::S("INPROGRESS".into()))
            .return_values_on_condition_check_failure(ReturnValuesOnConditionCheckFailure::AllOld)
            .send()
            .await;
        let failed = match sent {
            Ok(_) => return Found::Won,
            Err(error) => match error.into_service_error() {
                PutItemError::ConditionalCheckFailedException(failed) => failed,
                other => panic!("{other:?}"),
            },
        };
        let item = failed.item.expect("ALL_OLD returned the item");
        let text = |name: &str| item[name].as_s().unwrap().clone();
        match text("status").as_str() {
            "COMPLETED" => Found::Completed {
                data: text("data"),
                validation: text("validation"),
            },
            _ => Found::InProgress,
        }
    }

    async fn complete(&self, pk: &str, data: &str) {
        self.client
            .update_item()
            .table_name(&self.table)
            .set_key(Some(self.key(pk)))
            .update_expression("SET #s = :c, #d = :d")
            .expression_attribute_names("#s", "status")
            .expression_attribute_names("#d", "data")
            .expression_attribute_values(":c", AttributeValue::S("COMPLETED".into()))
            .expression_attribute_values(":d", AttributeValue::S(data.into()))
            .send()
            .await
            .expect("complete by hand");
    }
}

/// The same four calls by hand.
async fn by_hand(emulator: Emulator, value: &Receipt) -> Vec<Row> {
    let meter = Meter::default();
    let (table, plain) = table(emulator, &meter).await;
    let hand = ByHand {
        client: meter.on(&plain),
        table: table.clone(),
    };
    let pk = "idem#by-hand-o-1";
    let data = serde_json::to_string(value).unwrap();
    let validation =
        |v: &Receipt| RecordKey::new("payload", &serde_json::to_string(v).unwrap()).to_hex();
    assert!(matches!(
        hand.claim(pk, &validation(value)).await,
        Found::Won
    ));
    let claim = size(&plain, &table, pk).await;
    hand.complete(pk, &data).await;
    let done = size(&plain, &table, pk).await;
    let mut rows = vec![Row {
        protocol: "by hand",
        call: "fresh",
        sent: meter.take(),
        by_rule: write_units(0, claim) + write_units(claim, done),
        item: done,
    }];
    match hand.claim(pk, &validation(value)).await {
        Found::Completed {
            data: found,
            validation: v,
        } => {
            assert_eq!((found, v), (data.clone(), validation(value)))
        }
        _ => panic!("no replay"),
    }
    rows.push(failed("by hand", "replay", meter.take(), done));
    let mut other = value.clone();
    other.cents += 1;
    match hand.claim(pk, &validation(&other)).await {
        Found::Completed { validation: v, .. } => assert_ne!(v, validation(&other)),
        _ => panic!("no mismatch"),
    }
    rows.push(failed("by hand", "mismatch", meter.take(), done));
    let busy = "idem#by-hand-o-2";
    assert!(matches!(
        hand.claim(busy, &validation(value)).await,
        Found::Won
    ));
    meter.take();
    let pending = size(&plain, &table, busy).await;
    assert!(matches!(
        hand.claim(busy, &validation(value)).await,
        Found::InProgress
    ));
    rows.push(failed("by hand", "in progress", meter.take(), pending));
    rows
}

fn print(emulator: Emulator, value: &Receipt, rows: &[Row]) {
    let bytes = serde_json::to_vec(value).unwrap().len();
    println!("\n{emulator:?}, a result of {bytes} bytes of JSON:");
    println!(
        "| protocol | call | requests | operations | units reported | units by rule | item bytes |"
    );
    println!("| --- | --- | ---: | --- | ---: | ---: | ---: |");
    for row in rows {
        let reported = match (row.reported(), row.sent.iter().all(|s| s.units.is_some())) {
            (Some(units), true) => format!("{units}"),
            (Some(units), false) => format!("{units} + none"),
            (None, _) => "none".to_owned(),
        };
        println!(
            "| {} | {} | {} | {} | {} | {} | {} |",
            row.protocol,
            row.call,
            row.sent.len(),
            row.operations().join(" + "),
            reported,
            row.by_rule,
            row.item
        );
    }
}

/// Both protocols send the same requests per call: a fresh call its claim
/// and its completion, a replay, a mismatch and a call in progress the
/// one claim, whose failed condition returned the item; no reads.
async fn measure(emulator: Emulator) {
    for note in [0, 3000] {
        let value = receipt(note);
        let mut rows = through_idem(emulator, &value).await;
        rows.extend(by_hand(emulator, &value).await);
        print(emulator, &value, &rows);
        let shape: Vec<(&str, &str, Vec<&str>)> = rows
            .iter()
            .map(|r| (r.protocol, r.call, r.operations()))
            .collect();
        let (update, put) = ("UpdateItem", "PutItem");
        assert_eq!(
            shape,
            [
                ("idem", "fresh", vec![update, update]),
                ("idem", "replay", vec![update]),
                ("idem", "mismatch", vec![update]),
                ("idem", "in progress", vec![update]),
                ("by hand", "fresh", vec![put, update]),
                ("by hand", "replay", vec![put]),
                ("by hand", "mismatch", vec![put]),
                ("by hand", "in progress", vec![put]),
            ]
        );
        for row in &rows {
            // A failed condition's answer carries no units, on every
            // endpoint; a write that succeeded reports its units.
            let fresh = row.call == "fresh";
            assert!(
                row.sent.iter().all(|s| s.units.is_some() == fresh),
                "{row:?}"
            );
            // dynoxide counts by DynamoDB's rules (moto does not): the
            // rules here agree with it.
            if fresh && emulator == Emulator::Dynoxide {
                assert_eq!(row.reported(), Some(row.by_rule), "{row:?}");
            }
        }
    }
}

#[tokio::test]
async fn capacity_per_call_on_dynoxide() {
    measure(Emulator::Dynoxide).await;
}

#[tokio::test]
async fn capacity_per_call_on_moto() {
    measure(Emulator::Moto).await;
}
