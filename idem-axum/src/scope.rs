//! What identifies a request to the layer: the scope of its key (method,
//! route, principal) and the fingerprint of its content.

use axum::http::header;
use axum::http::request::Parts;
use bytes::Bytes;

use idem_core::KeyPart;
use idem_core::fingerprint::{Digester, Fingerprint, FingerprintError};
use idem_core::key::KeyHasher;

/// How the layer fingerprints a JSON body.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum JsonBodies {
    /// By the value it parses as: map order and whitespace do not matter.
    Canonical,
    /// By its bytes, as every other body.
    Exact,
}

/// SHA-256 over the request's path and query and its body: for an
/// `application/json` or `…+json` body that parses, the JSON value (with
/// [`JsonBodies::Canonical`]), else the body's bytes. The second
/// fingerprint is the bytes' one when the first is the value's: records
/// written before JSON bodies were canonical by default hold it.
pub(crate) fn fingerprint(
    json: JsonBodies,
    parts: &Parts,
    body: &Bytes,
) -> Result<(Fingerprint, Option<Fingerprint>), FingerprintError> {
    let target = parts.uri.path_and_query().map_or("/", |p| p.as_str());
    let value = (json == JsonBodies::Canonical && is_json(parts))
        .then(|| serde_json::from_slice::<serde_json::Value>(body).ok())
        .flatten();
    let bytes = || digest(target, serde_bytes::Bytes::new(body));
    match value {
        Some(value) => Ok((digest(target, &("json", value))?, Some(bytes()?))),
        None => Ok((bytes()?, None)),
    }
}

fn digest<T: serde::Serialize + ?Sized>(
    target: &str,
    body: &T,
) -> Result<Fingerprint, FingerprintError> {
    let mut digest = Digester::new();
    digest.part(serde_bytes::Bytes::new(target.as_bytes()))?;
    digest.part(body)?;
    Ok(digest.finish())
}

/// `application/json`, or a `+json` type such as `application/merge-patch+json`.
fn is_json(parts: &Parts) -> bool {
    let Some(value) = parts.headers.get(header::CONTENT_TYPE) else {
        return false;
    };
    let Ok(value) = value.to_str() else {
        return false;
    };
    let essence = value.split(';').next().unwrap_or_default().trim();
    let Some((kind, subtype)) = essence.split_once('/') else {
        return false;
    };
    kind.eq_ignore_ascii_case("application")
        && (subtype.eq_ignore_ascii_case("json") || subtype.to_ascii_lowercase().ends_with("+json"))
}

/// The scope of a request's key: method, route and principal.
pub(crate) struct HttpScope {
    pub(crate) method: String,
    pub(crate) route: String,
    pub(crate) principal: Option<String>,
}

impl HttpScope {
    /// Method and route: what run times are tracked by.
    pub(crate) fn route_key(&self) -> String {
        format!("{} {}", self.method, self.route)
    }
}

impl KeyPart for HttpScope {
    fn write_key(&self, hasher: &mut KeyHasher) {
        hasher.write_bytes(b"idem/http/v1");
        hasher.write_bytes(self.method.as_bytes());
        hasher.write_bytes(self.route.as_bytes());
        hasher.write_bool(self.principal.is_some());
        if let Some(principal) = &self.principal {
            hasher.write_bytes(principal.as_bytes());
        }
    }

    fn describe(&self, out: &mut String) {
        out.push_str(&self.method);
        out.push(' ');
        out.push_str(&self.route);
        if let Some(principal) = &self.principal {
            out.push_str(" for ");
            out.push_str(principal);
        }
    }
}

#[cfg(test)]
mod tests {
    use axum::http::Request;

    use super::*;

    /// Stored records are found by these bytes: the path and query, then
    /// the body, each hashed as one byte string (tag, length, bytes).
    #[test]
    fn a_request_fingerprint_keeps_its_bytes() {
        let (parts, ()) = Request::post("/orders?x=1").body(()).unwrap().into_parts();
        let body = Bytes::from_static(br#"{"sku":"tea"}"#);
        let (fingerprint, bytes) = fingerprint(JsonBodies::Canonical, &parts, &body).unwrap();
        assert_eq!(bytes, None, "no Content-Type: the body's bytes");
        let hex: String = fingerprint
            .as_bytes()
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        assert_eq!(
            hex,
            "6c0cd8d134355f3290d7e11bf8135233d0e4f52d25e2f7418950306af55e3b2b"
        );
    }

    fn parts(content_type: Option<&str>) -> Parts {
        let mut request = Request::post("/orders");
        if let Some(content_type) = content_type {
            request = request.header("content-type", content_type);
        }
        request.body(()).unwrap().into_parts().0
    }

    /// JSON media types with parameters and any case; nothing else.
    #[test]
    fn json_is_told_by_its_media_type() {
        for json in [
            "application/json",
            "Application/JSON; charset=utf-8",
            "application/merge-patch+json",
            "application/problem+JSON",
        ] {
            assert!(is_json(&parts(Some(json))), "{json}");
        }
        for other in ["text/plain", "application/jsonl", "json", "text/json+xml"] {
            assert!(!is_json(&parts(Some(other))), "{other}");
        }
        assert!(!is_json(&parts(None)));
    }

    /// One JSON value however its keys are ordered and spaced; the bytes'
    /// fingerprint beside it, and alone when asked or when it is not JSON.
    #[test]
    fn a_json_body_is_fingerprinted_by_its_value() {
        let json = parts(Some("application/json"));
        let one = Bytes::from_static(br#"{"sku":"tea","qty":2}"#);
        let two = Bytes::from_static(b"{ \"qty\": 2,\n \"sku\": \"tea\" }");
        let (a, a_bytes) = fingerprint(JsonBodies::Canonical, &json, &one).unwrap();
        let (b, b_bytes) = fingerprint(JsonBodies::Canonical, &json, &two).unwrap();
        assert_eq!(a, b);
        assert_ne!(a_bytes, b_bytes);
        let (exact, none) = fingerprint(JsonBodies::Exact, &json, &one).unwrap();
        assert_eq!((Some(exact), none), (a_bytes, None));
        let broken = Bytes::from_static(b"{not json");
        let (bytes, none) = fingerprint(JsonBodies::Canonical, &json, &broken).unwrap();
        assert_eq!(none, None);
        assert_eq!(
            bytes,
            fingerprint(JsonBodies::Exact, &json, &broken).unwrap().0
        );
    }
}
