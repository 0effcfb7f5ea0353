//! A stored value for people: the record's JSON with format 3's escapes
//! rendered as what they stand for.

use std::fmt::Write as _;

use serde_json::Value;

/// Renders a value read by [`decode_record_json`](super::decode_record_json)
/// for people, pretty-printed: `{"$u128":"340…"}` shows as the number,
/// `{"$f64":"NaN"}` as `NaN`, `{"$some":null}` as `Some(null)`, a `$map`
/// as `{key: value}` with its keys as they are, and an escaped `$$key` as
/// `$key`. Everything else is pretty JSON.
///
/// ```
/// use idem::admin::display_value;
/// let stored = serde_json::json!({ "max": { "$u128": "340282366920938463463374607431768211455" },
///                                  "ratio": { "$f64": "NaN" }, "note": { "$some": null } });
/// let shown = display_value(&stored);
/// assert!(shown.contains(r#""max": 340282366920938463463374607431768211455"#));
/// assert!(shown.contains(r#""ratio": NaN"#));
/// assert!(shown.contains(r#""note": Some(null)"#));
/// ```
pub fn display_value(value: &Value) -> String {
    let mut out = String::new();
    write_value(&mut out, value, 0);
    out
}

fn write_value(out: &mut String, value: &Value, depth: usize) {
    match value {
        Value::Object(map) if map.len() == 1 => {
            let (key, inner) = map.iter().next().expect("one entry");
            if !write_escape(out, key, inner, depth) {
                write_object(out, map.iter().map(|(k, v)| (Key::Text(k), v)), depth);
            }
        }
        Value::Object(map) => write_object(out, map.iter().map(|(k, v)| (Key::Text(k), v)), depth),
        Value::Array(items) if !items.is_empty() => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                out.push_str(if i == 0 { "\n" } else { ",\n" });
                indent(out, depth + 1);
                write_value(out, item, depth + 1);
            }
            out.push('\n');
            indent(out, depth);
            out.push(']');
        }
        scalar => out.push_str(&scalar.to_string()),
    }
}

/// Writes the escape `{key: inner}` stands for; false if it is none.
fn write_escape(out: &mut String, key: &str, inner: &Value, depth: usize) -> bool {
    match (key, inner) {
        ("$some", _) => {
            out.push_str("Some(");
            write_value(out, inner, depth);
            out.push(')');
        }
        ("$f64" | "$f32" | "$u128" | "$i128", Value::String(text)) => out.push_str(text),
        ("$map", Value::Array(pairs)) => {
            let entries = pairs
                .iter()
                .map(|pair| match pair.as_array().map(Vec::as_slice) {
                    Some([k, v]) => (Key::Value(k), v),
                    _ => (Key::Value(pair), &Value::Null),
                });
            write_object(out, entries, depth);
        }
        _ => return false,
    }
    true
}

enum Key<'a> {
    /// An object's own key, `$$`-escaped when it starts with `$`.
    Text(&'a str),
    /// A `$map` key: any value.
    Value(&'a Value),
}

fn write_object<'a>(
    out: &mut String,
    entries: impl ExactSizeIterator<Item = (Key<'a>, &'a Value)>,
    depth: usize,
) {
    if entries.len() == 0 {
        out.push_str("{}");
        return;
    }
    out.push('{');
    for (i, (key, value)) in entries.enumerate() {
        out.push_str(if i == 0 { "\n" } else { ",\n" });
        indent(out, depth + 1);
        match key {
            Key::Text(text) => {
                let text = text
                    .strip_prefix('$')
                    .filter(|t| t.starts_with('$'))
                    .unwrap_or(text);
                out.push_str(&Value::from(text).to_string());
            }
            Key::Value(key) => write_value(out, key, depth + 1),
        }
        out.push_str(": ");
        write_value(out, value, depth + 1);
    }
    out.push('\n');
    indent(out, depth);
    out.push('}');
}

fn indent(out: &mut String, depth: usize) {
    let _ = write!(out, "{:width$}", "", width = depth * 2);
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn escapes_render_as_what_they_stand_for() {
        let stored = json!({
            "$$ref": { "$map": [[1, { "$some": { "$some": null } }], [[2, 3], { "$f32": "-Infinity" }]] },
            "min": { "$i128": "-170141183460469231731687303715884105728" },
            "plain": [1, "two", null, {}],
        });
        assert_eq!(
            display_value(&stored),
            r#"{
  "$ref": {
    1: Some(Some(null)),
    [
      2,
      3
    ]: -Infinity
  },
  "min": -170141183460469231731687303715884105728,
  "plain": [
    1,
    "two",
    null,
    {}
  ]
}"#
        );
    }

    #[test]
    fn a_one_key_object_that_is_no_escape_stays_an_object() {
        assert_eq!(display_value(&json!({ "a": 1 })), "{\n  \"a\": 1\n}");
        assert_eq!(display_value(&json!({ "$f64": 1 })), "{\n  \"$f64\": 1\n}");
    }
}
