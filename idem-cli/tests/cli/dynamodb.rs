//! `idem --dynamodb TABLE --endpoint-url URL` against dynoxide (see
//! dynamodb_server.rs), on a table filled through idem: what every store
//! shows (`list`, `inspect`, `stats`, `forget`, an HTTP record found from
//! what the client knows), a stuck claim found by age and a lapsed one
//! purged (dated back by `UpdateItem`s on their items), the key prefix
//! honoured, and a missing table refused with exit 3.

use aws_sdk_dynamodb::types::AttributeValue;
use idem::key::RecordKey;
use idem::store::Token;
use idem::{DynamoDbStore, Idempotency};

use crate::commands::{
    a_lapsed_claim_shows_as_lapsed, idem_json, lists_inspects_counts_and_forgets, run,
    stuck_then_expired,
};
use crate::dynamodb_server::{self, Emulator};

/// Moves a record item's times back: its claim's creation by two hours
/// (`#created`), or its lease and its keeping by two days.
const DATE_BACK: [&str; 2] = [
    "SET #created = #created - :back",
    "SET #exp = #exp - :back, #kept = #kept - :back",
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dynamodb() {
    let url = dynamodb_server::url(Emulator::Dynoxide).await;
    let client = dynamodb_server::client(&url);
    let table = format!("idem-cli-{:x}", Token::random().to_u128() as u64);
    let store = DynamoDbStore::new(client.clone(), &table);
    store.create_table().await.unwrap();
    let idem = Idempotency::new(store.clone());
    let target = ["--dynamodb", &table, "--endpoint-url", &url];
    lists_inspects_counts_and_forgets(&target, &idem, "shop").await;
    crate::http_records::found_from_what_the_client_knows(&target, &idem).await;
    let date_back = async |expression: &str, key: &[u8]| {
        let key = RecordKey::from_bytes(key.try_into().unwrap());
        let back: i64 = match expression.contains("#created") {
            true => 2 * 3600 * 1000,
            false => 2 * 24 * 3600 * 1000,
        };
        let mut update = client
            .update_item()
            .table_name(&table)
            .key("pk", AttributeValue::S(store.partition_key(&key)))
            .key("sk", AttributeValue::S("record".to_owned()))
            .update_expression(expression)
            .condition_expression("attribute_exists(pk)")
            .expression_attribute_values(":back", AttributeValue::N(back.to_string()));
        for name in ["created", "exp", "kept"] {
            if expression.contains(&format!("#{name}")) {
                update = update.expression_attribute_names(format!("#{name}"), name);
            }
        }
        update.send().await.expect("date the item back");
    };
    stuck_then_expired(&target, &store, DATE_BACK, date_back).await;
    a_lapsed_claim_shows_as_lapsed(&target, &store).await;

    // Another prefix: none of these records.
    let others = idem_json(&target, &["list", "--dynamodb-prefix", "other#"]);
    assert_eq!(others, serde_json::json!([]), "{others}");
    let listed = idem_json(&target, &["list"]);
    assert!(!listed.as_array().unwrap().is_empty(), "{listed}");
}

/// A table that does not exist: a store error (exit 3) that names the
/// table and says what to do; nothing is created.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_dynamodb_table_fails_clearly() {
    let url = dynamodb_server::url(Emulator::Dynoxide).await;
    let table = format!("idem-cli-missing-{:x}", Token::random().to_u128() as u64);
    for command in [&["stats"][..], &["list"], &["purge"]] {
        let args = [&["--dynamodb", &table, "--endpoint-url", &url][..], command].concat();
        let (code, out, err) = run(&args);
        assert_eq!(code, 3, "{args:?}: {out}{err}");
        assert!(err.contains(&table), "{args:?}: {err}");
        assert!(err.contains("ResourceNotFoundException"), "{args:?}: {err}");
        assert!(err.contains("create the table"), "{args:?}: {err}");
    }
    let tables = dynamodb_server::client(&url)
        .list_tables()
        .send()
        .await
        .unwrap()
        .table_names
        .unwrap_or_default();
    assert!(!tables.contains(&table), "{tables:?}");
}
