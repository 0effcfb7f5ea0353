//! What identifies a request to the layer: the scope of its key (method,
//! route, principal) and the fingerprint of its content.

use axum::http::request::Parts;
use bytes::Bytes;

use idem_core::KeyPart;
use idem_core::fingerprint::{Digester, Fingerprint, FingerprintError};
use idem_core::key::KeyHasher;

/// SHA-256 over the request's path and query and its body: the body's
/// bytes, or with [`canonical_json`](crate::IdempotencyLayer::canonical_json)
/// the JSON value it parses as (map order and whitespace then do not
/// matter; a body that is not JSON is hashed as bytes).
pub(crate) fn fingerprint(
    canonical_json: bool,
    parts: &Parts,
    body: &Bytes,
) -> Result<Fingerprint, FingerprintError> {
    let target = parts.uri.path_and_query().map_or("/", |p| p.as_str());
    let mut digest = Digester::new();
    digest.part(serde_bytes::Bytes::new(target.as_bytes()))?;
    let json = canonical_json
        .then(|| serde_json::from_slice::<serde_json::Value>(body).ok())
        .flatten();
    match json {
        Some(value) => digest.part(&("json", value))?,
        None => digest.part(serde_bytes::Bytes::new(body))?,
    }
    Ok(digest.finish())
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
        let fingerprint = fingerprint(false, &parts, &body).unwrap();
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
}
