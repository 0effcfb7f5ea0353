//! The record codec (format 3: JSON with escapes for what JSON loses)
//! beside plain serde_json, on a typical receipt and on a small value:
//! encode and decode, in one process. A call is 64 round trips, so the
//! harness's own cost per call stays small beside the work measured.
//! `cargo bench -p idem-integration --bench throughput -- codec`.

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use crate::harness::{Report, measure, runner};

const CALLS: u64 = 20_000;
const PER_CALL: usize = 64;

#[derive(Serialize, Deserialize, Clone, PartialEq, Debug)]
struct Receipt {
    id: String,
    order: u64,
    amount_cents: u64,
    currency: String,
    status: Status,
    created_at: String,
    card_last4: Option<String>,
    refunded_cents: Option<u64>,
    /// `Some(None)`: cleared (escaped in format 3).
    coupon: Option<Option<String>>,
    lines: Vec<Line>,
}

#[derive(Serialize, Deserialize, Clone, PartialEq, Debug)]
enum Status {
    Captured,
    Declined { reason: String },
}

#[derive(Serialize, Deserialize, Clone, PartialEq, Debug)]
struct Line {
    sku: String,
    quantity: u32,
    unit_cents: u64,
}

fn receipt() -> Receipt {
    Receipt {
        id: "rcpt_3f9c2a7e5b1d4c08".into(),
        order: 918_273,
        amount_cents: 12_990,
        currency: "EUR".into(),
        status: Status::Captured,
        created_at: "2026-11-24T00:40:00Z".into(),
        card_last4: Some("4242".into()),
        refunded_cents: None,
        coupon: None,
        lines: (0..3)
            .map(|i| Line {
                sku: format!("SKU-{i:04}"),
                quantity: i + 1,
                unit_cents: 1_990 + u64::from(i) * 1_000,
            })
            .collect(),
    }
}

fn record_round_trip<T: Serialize + DeserializeOwned>(value: &T) {
    for _ in 0..PER_CALL {
        let bytes = idem::admin::encode_record(std::hint::black_box(value)).unwrap();
        let back: T = idem::admin::decode_record(&bytes).unwrap();
        std::hint::black_box(back);
    }
}

fn json_round_trip<T: Serialize + DeserializeOwned>(value: &T) {
    for _ in 0..PER_CALL {
        let bytes = serde_json::to_vec(std::hint::black_box(value)).unwrap();
        let back: T = serde_json::from_slice(&bytes).unwrap();
        std::hint::black_box(back);
    }
}

async fn compare<T>(report: &mut Report, scenario: &str, value: T)
where
    T: Serialize + DeserializeOwned + Clone + Send + Sync + 'static,
{
    let (a, b) = (value.clone(), value);
    report
        .scenario(
            scenario,
            vec![
                (
                    "record format 3",
                    runner(move || {
                        let a = a.clone();
                        measure(1, CALLS, move |_| {
                            record_round_trip(&a);
                            async {}
                        })
                    }),
                ),
                (
                    "plain serde_json",
                    runner(move || {
                        let b = b.clone();
                        measure(1, CALLS, move |_| {
                            json_round_trip(&b);
                            async {}
                        })
                    }),
                ),
            ],
        )
        .await;
}

pub(crate) async fn run(report: &mut Report) {
    compare(report, "codec: receipt, 64 round trips", receipt()).await;
    let cleared = Receipt {
        coupon: Some(None),
        ..receipt()
    };
    // serde_json writes the `Some(None)` as `null` and reads back `None`:
    // it costs the same but loses it; format 3 takes the escaped path.
    compare(
        report,
        "codec: receipt with Some(None), 64 round trips",
        cleared,
    )
    .await;
    compare(report, "codec: u64, 64 round trips", 918_273u64).await;
}
