//! What the commands print: aligned tables for people, JSON for scripts.

use std::time::Duration;

use idem::admin::{Purged, RecordInfo, RecordParts, Stats, decode_record_json, display_value};
use serde_json::{Value, json};

mod response;

/// A duration as people read it: `850ms`, `42s`, `3h 5m 2s`.
pub(crate) fn human(duration: Duration) -> String {
    let rounded = if duration < Duration::from_secs(1) {
        Duration::from_millis(duration.as_millis() as u64)
    } else {
        Duration::from_secs(duration.as_secs())
    };
    humantime::format_duration(rounded).to_string()
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn millis(duration: Option<Duration>) -> Value {
    duration.map_or(Value::Null, |d| json!(d.as_millis() as u64))
}

/// One record as JSON; its value decoded when its bytes are there.
pub(crate) fn record_json(info: &RecordInfo) -> Value {
    let mut out = json!({
        "key": info.key.to_hex(),
        "site": info.site,
        "state": info.state.as_str(),
        "age_ms": info.age.as_millis() as u64,
        "expires_in_ms": millis(info.expires_in),
        "fingerprint": hex(info.fingerprint.as_bytes()),
        "size": info.size,
    });
    if let Some(record) = &info.record {
        out["value"] = match decode_record_json(record) {
            Ok(parts) => {
                let mut value = json!({
                    "kind": parts.kind,
                    "version": parts.version,
                    "type": parts.type_name,
                    "json": parts.value,
                });
                if let Some(response) = response::response(&parts) {
                    value["response"] = response.to_json();
                }
                value
            }
            Err(err) => json!({ "error": err.to_string() }),
        };
    }
    out
}

/// `inspect` for people: one field a line, the value pretty-printed.
pub(crate) fn record_text(info: &RecordInfo) -> String {
    let or_dash = |d: Option<Duration>| d.map_or("-".to_owned(), human);
    let mut out = format!(
        "key          {}\nsite         {}\nstate        {}\nage          {}\nexpires in   {}\nfingerprint  {}\nsize         {} bytes\n",
        info.key.to_hex(),
        site_text(info),
        info.state.as_str(),
        human(info.age),
        or_dash(info.expires_in),
        hex(info.fingerprint.as_bytes()),
        info.size,
    );
    if let Some(record) = &info.record {
        match decode_record_json(record) {
            Ok(parts) => out += &value_text(&parts),
            Err(err) => out += &format!("value        (cannot be read: {err})\n"),
        }
    }
    out
}

/// The value's lines of `inspect`: a stored HTTP response as status,
/// headers and body (the record's type is the layer's own business),
/// anything else with its kind, version and type and its escapes rendered.
fn value_text(parts: &RecordParts) -> String {
    if let Some(response) = response::response(parts) {
        return format!("version      {}\n{}", parts.version, response.to_text());
    }
    let value = match &parts.value {
        serde_json::Value::String(reason) if parts.kind == "not_stored" => reason.clone(),
        value => display_value(value),
    };
    format!(
        "kind         {}\nversion      {}\ntype         {}\nvalue        {}\n",
        parts.kind,
        parts.version,
        parts.type_name,
        value.replace('\n', "\n             ")
    )
}

fn site_text(info: &RecordInfo) -> String {
    info.site.clone().unwrap_or_else(|| "-".to_owned())
}

/// `list` for people: a header, one aligned row a record, and how many
/// were found in which store.
pub(crate) fn list_text(records: &[RecordInfo], store: &str) -> String {
    let header = ["KEY", "STATE", "AGE", "EXPIRES IN", "SIZE", "SITE"].map(str::to_owned);
    let rows: Vec<[String; 6]> = records
        .iter()
        .map(|info| {
            [
                info.key.to_hex(),
                info.state.as_str().to_owned(),
                human(info.age),
                info.expires_in.map_or("-".to_owned(), human),
                info.size.to_string(),
                site_text(info),
            ]
        })
        .collect();
    let mut widths = header.clone().map(|h| h.len());
    for row in &rows {
        for (width, cell) in widths.iter_mut().zip(row) {
            *width = (*width).max(cell.len());
        }
    }
    let line = |row: &[String; 6]| {
        let cells: Vec<String> = row
            .iter()
            .zip(widths)
            .map(|(cell, width)| format!("{cell:<width$}"))
            .collect();
        cells.join("  ").trim_end().to_owned() + "\n"
    };
    let mut out = line(&header);
    for row in &rows {
        out += &line(row);
    }
    out + &format!("{} record(s) in {store}\n", records.len())
}

fn total(stats: &Stats) -> u64 {
    stats.in_progress + stats.completed + stats.expired + stats.lapsed + stats.tombstones
}

pub(crate) fn stats_json(stats: &Stats) -> Value {
    json!({
        "in_progress": stats.in_progress,
        "completed": stats.completed,
        "expired": stats.expired,
        "lapsed": stats.lapsed,
        "tombstones": stats.tombstones,
        "total": total(stats),
        "bytes": stats.bytes,
    })
}

pub(crate) fn stats_text(stats: &Stats) -> String {
    format!(
        "in progress  {}\ncompleted    {}\nexpired      {}\nlapsed       {}\ntombstones   {}\ntotal        {}\nbytes        {}\n",
        stats.in_progress,
        stats.completed,
        stats.expired,
        stats.lapsed,
        stats.tombstones,
        total(stats),
        stats.bytes
    )
}

/// What `purge` did, as JSON.
pub(crate) fn purged_json(purged: &Purged) -> Value {
    json!({
        "purged": purged.records,
        "steps": purged.steps,
        "tombstones": purged.tombstones,
    })
}

/// What `purge` did, in words.
pub(crate) fn purged_text(purged: &Purged, store: &str) -> String {
    let tombstones = match purged.tombstones {
        0 => String::new(),
        n => format!("; {n} record(s) kept as tombstones without their value"),
    };
    format!(
        "purged {} expired record(s) and {} step(s) of expired calls in {store}{tombstones}\n",
        purged.records, purged.steps
    )
}
