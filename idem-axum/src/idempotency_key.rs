//! The `Idempotency-Key` header: parsing and the extractor.

use axum::extract::{FromRequestParts, OptionalFromRequestParts};
use axum::http::request::Parts;
use axum::http::{HeaderMap, HeaderName};
use serde::{Deserialize, Serialize};

use crate::Problem;
use idem_core::KeyPart;
use idem_core::key::KeyHasher;

/// The request header that carries the key: `Idempotency-Key`.
pub const IDEMPOTENCY_KEY: HeaderName = HeaderName::from_static("idempotency-key");

/// The response header set on a replayed answer: `Idempotent-Replayed: true`.
pub const IDEMPOTENT_REPLAYED: HeaderName = HeaderName::from_static("idempotent-replayed");

/// The response header set on a first answer that is not stored although
/// its key is settled (too large, or exempt from capture):
/// `Idempotent-Stored: false`. Duplicates get the `not-stored` problem.
pub const IDEMPOTENT_STORED: HeaderName = HeaderName::from_static("idempotent-stored");

/// The longest accepted key, in bytes.
pub const MAX_KEY_BYTES: usize = 255;

/// The value of an `Idempotency-Key` header: one to 255 bytes of visible
/// ASCII.
///
/// The whole field is read as the IETF draft defines it, one RFC 8941
/// structured-field item (parsed by the `sfv` crate): a string
/// (`Idempotency-Key: "8e03978e-40d5-43e8"`, with `\"` and `\\` escapes
/// and optional parameters, which are ignored) or a bare token
/// (`Idempotency-Key: 8e03978e-40d5-43e8`; one starting with a digit, as
/// a UUID may, is accepted too). A list is refused (400): two keys folded
/// into one field (`"k-1";v=1, "k-2"`, as a proxy joins two headers) name
/// no one key. The other items are refused too, so that no two spellings
/// name one key: an integer or decimal (`42`, which would otherwise be the
/// key `"42"`), a byte sequence (`:cHJldGVuZA==:`), a boolean (`?1`), a
/// date or a display string.
///
/// As an axum extractor it answers 400 (`application/problem+json`) when
/// the header is missing, empty, longer than 255 bytes, malformed or sent
/// more than once; `Option<IdempotencyKey>` makes it optional (a missing
/// header is `None`, a malformed one is still 400). It implements
/// [`KeyPart`], so it can be the `key` of an `#[idempotent]` function.
///
/// The key is the client's choice, so put the caller in that function's
/// `scope` (`scope = ("orders", user.id)`): otherwise a client who reuses
/// or guesses another client's key gets that client's stored result.
/// ([`IdempotencyLayer`](crate::IdempotencyLayer) does this itself,
/// by a hash of the request's credentials.)
///
/// ```
/// use axum::{Json, Router, routing::post};
/// use idem::http::IdempotencyKey;
///
/// async fn create(key: IdempotencyKey, Json(order): Json<serde_json::Value>) -> String {
///     format!("{} bytes of key", key.as_str().len())
/// }
/// async fn maybe(key: Option<IdempotencyKey>) -> &'static str {
///     if key.is_some() { "keyed" } else { "unkeyed" }
/// }
/// let app: Router = Router::new().route("/orders", post(create)).route("/notes", post(maybe));
///
/// let key = IdempotencyKey::parse(br#""order-1""#).unwrap();
/// assert_eq!(key.as_str(), "order-1");
/// assert_eq!(IdempotencyKey::parse(b"order-1").unwrap(), key);
/// assert_eq!(IdempotencyKey::parse(b"").unwrap_err().status(), 400);
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(transparent)]
pub struct IdempotencyKey(String);

impl IdempotencyKey {
    /// Parses one header value: a structured-field string or a bare token,
    /// and nothing after it but parameters.
    ///
    /// ```
    /// use idem::http::IdempotencyKey;
    ///
    /// assert_eq!(IdempotencyKey::parse(br#""a \"quoted\" key";v=1"#).unwrap().as_str(), r#"a "quoted" key"#);
    /// assert!(IdempotencyKey::parse(&[b'k'; 256]).is_err());
    /// assert!(IdempotencyKey::parse(br#""unterminated"#).is_err());
    /// assert!(IdempotencyKey::parse(br#""k-1";v=1, "k-2""#).is_err());
    /// ```
    pub fn parse(value: &[u8]) -> Result<Self, Problem> {
        let value = value.trim_ascii();
        let key = match sfv::Parser::new(value).parse::<sfv::Item>() {
            Ok(item) => item_key(item.bare_item)?,
            Err(_) if is_list(value) => return Err(invalid(ONE_KEY)),
            Err(err) => lenient(value, &err)?,
        };
        if key.is_empty() {
            return Err(invalid("the key is empty"));
        }
        if key.len() > MAX_KEY_BYTES {
            return Err(invalid(&format!(
                "the key is {} bytes, longer than {MAX_KEY_BYTES}",
                key.len()
            )));
        }
        Ok(Self(key))
    }

    /// The key from a request's headers: `Ok(None)` when there is no
    /// `Idempotency-Key` header, an error when it is invalid or repeated.
    ///
    /// ```
    /// use axum::http::HeaderMap;
    /// use idem::http::IdempotencyKey;
    ///
    /// let mut headers = HeaderMap::new();
    /// assert_eq!(IdempotencyKey::from_headers(&headers).unwrap(), None);
    /// headers.insert("idempotency-key", "\"k-1\"".parse().unwrap());
    /// assert_eq!(IdempotencyKey::from_headers(&headers).unwrap().unwrap().as_str(), "k-1");
    /// headers.append("idempotency-key", "\"k-2\"".parse().unwrap());
    /// assert_eq!(IdempotencyKey::from_headers(&headers).unwrap_err().status(), 400);
    /// ```
    pub fn from_headers(headers: &HeaderMap) -> Result<Option<Self>, Problem> {
        let mut values = headers.get_all(IDEMPOTENCY_KEY).iter();
        let Some(value) = values.next() else {
            return Ok(None);
        };
        if values.next().is_some() {
            return Err(invalid("send exactly one Idempotency-Key header"));
        }
        Self::parse(value.as_bytes()).map(Some)
    }

    /// The key.
    ///
    /// ```
    /// let key = idem::http::IdempotencyKey::parse(b"k-1").unwrap();
    /// assert_eq!(key.as_str(), "k-1");
    /// ```
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The key, owned.
    ///
    /// ```
    /// let key = idem::http::IdempotencyKey::parse(b"k-1").unwrap();
    /// assert_eq!(key.into_string(), "k-1");
    /// ```
    pub fn into_string(self) -> String {
        self.0
    }
}

impl AsRef<str> for IdempotencyKey {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

/// Hashes as the same key as its string.
impl KeyPart for IdempotencyKey {
    fn write_key(&self, hasher: &mut KeyHasher) {
        self.0.as_str().write_key(hasher);
    }
    fn describe(&self, out: &mut String) {
        out.push_str(&self.0);
    }
}

/// The problem of a request that needs a key and has none.
pub(crate) fn missing() -> Problem {
    Problem::new(
        400,
        "missing-key",
        "Missing Idempotency-Key",
        "This request must carry an Idempotency-Key header, e.g. Idempotency-Key: \"8e03978e-40d5-43e8-bc93-6894a57f9324\".",
    )
}

fn invalid(reason: &str) -> Problem {
    Problem::from(idem_core::Error::InvalidKey(reason.to_owned()))
}

const NOT_A_STRING: &str = "the key must be a structured-field string (\"…\") or a token, not an integer, decimal, byte sequence or boolean; quote it";

const ONE_KEY: &str = "send exactly one key: the field holds a list";

/// The key an item names: a string's or a token's text.
fn item_key(bare: sfv::BareItem) -> Result<String, Problem> {
    match bare {
        sfv::BareItem::String(text) => Ok(text.into()),
        sfv::BareItem::Token(token) => Ok(token.into()),
        _ => Err(invalid(NOT_A_STRING)),
    }
}

/// Whether the field is a list of more than one member: two fields folded
/// into one, by the client or a proxy.
fn is_list(value: &[u8]) -> bool {
    sfv::Parser::new(value)
        .parse::<sfv::List>()
        .is_ok_and(|list| list.len() > 1)
}

/// A field that is no structured-field item: refused, unless it is a bare
/// key RFC 8941 has no token for (one starting with a digit, as a UUID
/// may), then well-formed parameters or nothing.
fn lenient(value: &[u8], err: &sfv::Error) -> Result<String, Problem> {
    match value.first() {
        Some(b'"') => {
            return Err(invalid(&format!(
                "the key is not a well-formed structured-field string: {err}"
            )));
        }
        Some(b':' | b'?' | b'@' | b'%') => return Err(invalid(NOT_A_STRING)),
        _ if is_sf_number(value) => return Err(invalid(NOT_A_STRING)),
        _ => {}
    }
    let at = value.iter().position(|&c| c == b';').unwrap_or(value.len());
    let (token, params) = value.split_at(at);
    let key = bare(token)?;
    if !params.is_empty()
        && sfv::Parser::new(&[b"k", params].concat())
            .parse::<sfv::Item>()
            .is_err()
    {
        return Err(invalid(if params.contains(&b',') {
            ONE_KEY
        } else {
            "the parameters after the key are malformed"
        }));
    }
    Ok(key)
}

/// Whether `value` reads as an RFC 8941 integer or decimal (§4.2.4),
/// parameters aside: `-`, digits, and maybe `.` and digits. (Of any
/// length: a 16-digit number is no valid integer, but it is no more a
/// token than a 15-digit one.)
fn is_sf_number(value: &[u8]) -> bool {
    let item = value.split(|&c| c == b';').next().unwrap_or_default();
    let item = item.trim_ascii_end();
    let item = item.strip_prefix(b"-").unwrap_or(item);
    let (whole, fraction) = match item.iter().position(|&c| c == b'.') {
        Some(dot) => (&item[..dot], Some(&item[dot + 1..])),
        None => (item, None),
    };
    let digits = |part: &[u8]| !part.is_empty() && part.iter().all(u8::is_ascii_digit);
    digits(whole) && fraction.is_none_or(digits)
}

/// A bare key: visible ASCII without quotes, backslashes or commas.
fn bare(token: &[u8]) -> Result<String, Problem> {
    if let Some(c) = token
        .iter()
        .find(|&&c| !(0x21..=0x7e).contains(&c) || matches!(c, b'"' | b'\\' | b','))
    {
        let reason = if *c == b',' {
            ONE_KEY.to_owned()
        } else {
            format!(
                "byte 0x{c:02x} is not allowed in a bare key; quote the key as a structured-field string"
            )
        };
        return Err(invalid(&reason));
    }
    Ok(String::from_utf8_lossy(token).into_owned())
}

impl<S: Send + Sync> FromRequestParts<S> for IdempotencyKey {
    type Rejection = Problem;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, Self::Rejection> {
        Self::from_headers(&parts.headers)?.ok_or_else(missing)
    }
}

impl<S: Send + Sync> OptionalFromRequestParts<S> for IdempotencyKey {
    type Rejection = Problem;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Option<Self>, Self::Rejection> {
        Self::from_headers(&parts.headers)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ok(value: &str) -> String {
        IdempotencyKey::parse(value.as_bytes())
            .unwrap_or_else(|p| panic!("{value:?}: {}", p.detail()))
            .into_string()
    }

    fn refused(value: &[u8]) -> String {
        IdempotencyKey::parse(value)
            .expect_err(&String::from_utf8_lossy(value))
            .detail()
            .to_owned()
    }

    #[test]
    fn structured_field_strings() {
        assert_eq!(ok(r#""abc""#), "abc");
        assert_eq!(ok(r#"  "with space"  "#), "with space");
        assert_eq!(ok(r#""q\"uote\\d""#), r#"q"uote\d"#);
        assert_eq!(ok(r#""abc";foo=1;bar"#), "abc");
        // RFC 8941 has no space before a parameter.
        assert!(refused(br#""abc" ;foo"#).contains("trailing characters"));
        assert!(refused(br#""abc"#).contains("unterminated string"));
        assert!(refused(br#""a\nb""#).contains("escape"));
        assert!(refused(br#""abc"x"#).contains("trailing characters"));
        assert!(refused("\"caf\u{e9}\"".as_bytes()).contains("invalid string character"));
        assert!(refused(b"\"a\tb\"").contains("invalid string character"));
        assert!(refused(br#""abc";v="#).contains("not a well-formed"));
    }

    #[test]
    fn bare_tokens() {
        assert_eq!(
            ok("8e03978e-40d5-43e8-bc93-6894a57f9324"),
            "8e03978e-40d5-43e8-bc93-6894a57f9324"
        );
        assert_eq!(ok("abc;v=1"), "abc");
        assert_eq!(ok("8e03978e-40d5;v=1"), "8e03978e-40d5");
        assert!(refused(b"a b").contains("0x20"));
        assert!(refused(b"a,b").contains("exactly one"));
        assert!(refused(b"ab\"").contains("0x22"));
        assert!(refused(b"8e03978e;v=").contains("parameters"));
    }

    #[test]
    fn other_structured_field_items_are_refused() {
        for value in ["42", "-7", "3.14", "42;v=1", ":cHJldGVuZA==:", "?1", "?0"] {
            assert!(
                refused(value.as_bytes()).contains("not an integer"),
                "{value}"
            );
        }
        assert_eq!(ok(r#""42""#), "42");
        // Bare keys that only start like a number stay keys.
        assert_eq!(ok("8e03978e-40d5"), "8e03978e-40d5");
        assert!(refused(b"1234567890123456").contains("not an integer"));
        assert_eq!(ok("1.2.3"), "1.2.3");
    }

    /// Two keys folded into one field (a proxy joining two headers) are a
    /// list, never the first key: with parameters on the first, in both
    /// forms (issue 37), and without.
    #[test]
    fn lists_are_refused() {
        for value in [
            r#""k-1";v=1, "k-2""#,
            r#""k-1", "k-2""#,
            "k-1;v=1, k-2",
            "k-1, k-2",
            "8e03978e;v=1, 9f14",
            "8e03978e, 9f14",
            r#""k-1";v=1,"k-2""#,
            r#"k-1;v="a", k-2"#,
        ] {
            assert!(refused(value.as_bytes()).contains("exactly one"), "{value}");
        }
    }

    #[test]
    fn length_limits() {
        assert!(refused(b"").contains("empty"));
        assert!(refused(b"  ").contains("empty"));
        assert!(refused(br#""""#).contains("empty"));
        assert_eq!(ok(&"k".repeat(255)).len(), 255);
        assert!(refused(&[b'k'; 256]).contains("256 bytes"));
        // Escapes count once: the limit is on the key, not the header.
        let escaped = format!("\"{}\"", r"\\".repeat(255));
        assert_eq!(ok(&escaped).len(), 255);
    }
}
