//! A response the HTTP layer stored, shown as one: status, headers, body
//! (its stored form, `{"t": text}` or `{"b64": base64}`, unwrapped).

use idem::admin::RecordParts;
use serde_json::{Value, json};

/// A stored response, read from a record's JSON.
pub(crate) struct Response<'a> {
    status: u64,
    headers: Vec<(&'a str, Blob<'a>)>,
    body: Blob<'a>,
}

/// Bytes as the layer stores them.
enum Blob<'a> {
    Text(&'a str),
    Base64(&'a str),
}

/// Whether a record's type is the HTTP layer's stored response, by name:
/// `idem_axum::stored::Kept` since the layer is a crate of its own, and
/// `…::http::stored::Kept` in records the facade's layer wrote before.
fn written_by_the_layer(type_name: &str) -> bool {
    type_name == "idem_axum::stored::Kept" || type_name.ends_with("::http::stored::Kept")
}

/// The response `parts` holds, if the HTTP layer wrote it.
pub(crate) fn response(parts: &RecordParts) -> Option<Response<'_>> {
    if parts.kind != "ok" || !written_by_the_layer(&parts.type_name) {
        return None;
    }
    let value = parts.value.as_object()?;
    let headers = value
        .get("headers")?
        .as_array()?
        .iter()
        .map(|pair| match pair.as_array()?.as_slice() {
            [name, blob_value] => Some((name.as_str()?, blob(blob_value)?)),
            _ => None,
        })
        .collect::<Option<Vec<_>>>()?;
    Some(Response {
        status: value.get("status")?.as_u64()?,
        headers,
        body: blob(value.get("body")?)?,
    })
}

fn blob(value: &Value) -> Option<Blob<'_>> {
    let object = value.as_object()?;
    match (object.get("t"), object.get("b64")) {
        (Some(Value::String(text)), None) => Some(Blob::Text(text)),
        (None, Some(Value::String(encoded))) => Some(Blob::Base64(encoded)),
        _ => None,
    }
}

impl Blob<'_> {
    fn to_json(&self) -> Value {
        match self {
            Blob::Text(text) => json!({ "text": text }),
            Blob::Base64(encoded) => json!({ "base64": encoded }),
        }
    }

    fn to_text(&self) -> String {
        match self {
            Blob::Text(text) => (*text).to_owned(),
            Blob::Base64(encoded) => format!("(binary, base64) {encoded}"),
        }
    }
}

impl Response<'_> {
    pub(crate) fn to_json(&self) -> Value {
        let headers: Vec<Value> = self
            .headers
            .iter()
            .map(|(name, value)| json!([name, value.to_json()]))
            .collect();
        json!({ "status": self.status, "headers": headers, "body": self.body.to_json() })
    }

    /// `inspect`'s lines: status, one header a line, the body.
    pub(crate) fn to_text(&self) -> String {
        let pad = "\n             ";
        let headers: Vec<String> = self
            .headers
            .iter()
            .map(|(name, value)| format!("{name}: {}", value.to_text()))
            .collect();
        format!(
            "status       {}\nheaders      {}\nbody         {}\n",
            self.status,
            if headers.is_empty() {
                "-".to_owned()
            } else {
                headers.join(pad)
            },
            self.body.to_text().replace('\n', pad)
        )
    }
}
