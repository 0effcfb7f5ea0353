//! Versions: entity tags and `If-Match` (RFC 9110 §8.8.3 and §13.1.1), so
//! an update names the version it was made against and a stale one is
//! refused instead of overwriting a newer state.

use std::convert::Infallible;
use std::fmt;

use axum::extract::{FromRequestParts, OptionalFromRequestParts};
use axum::http::request::Parts;
use axum::http::{HeaderMap, HeaderValue, header};
use axum::response::{IntoResponseParts, ResponseParts};

use crate::Problem;

/// An entity tag (RFC 9110 §8.8.3): the version of a resource, sent in
/// `ETag` and named again in `If-Match`.
///
/// [`ETag::strong`] and [`ETag::weak`] take any text: bytes an entity tag
/// cannot hold (space, `"`, control and non-ASCII characters) and `%` are
/// percent-encoded, so every text gives a valid tag and two texts never the
/// same one. As a response part it sets the `ETag` header.
///
/// ```
/// use axum::{Json, http::StatusCode};
/// use idem::http::ETag;
///
/// let version = 7;
/// let etag = ETag::strong(version);
/// assert_eq!(etag.to_string(), "\"7\"");
/// assert_eq!(ETag::weak("v 7").to_string(), "W/\"v%207\"");
/// assert_eq!(ETag::parse(b"W/\"x\""), Some(ETag::weak("x")));
///
/// // In a handler's answer:
/// let answer = (StatusCode::OK, etag, Json(serde_json::json!({ "limit": 100 })));
/// # let _ = answer;
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ETag {
    weak: bool,
    /// The opaque tag without its quotes, as text: only `etagc` bytes,
    /// but for obs-text (bytes from 0x80) a parsed tag may hold.
    tag: String,
    /// The parsed tag's octets when they are not UTF-8, so `tag` could
    /// only hold them lossily: two such tags differ by their octets. `None`
    /// whenever `tag` holds the octets exactly, so the derived `Eq` and
    /// `Hash` compare octets.
    octets: Option<Box<[u8]>>,
}

impl ETag {
    /// A strong entity tag: the same tag means the same bytes.
    ///
    /// ```
    /// assert_eq!(idem::http::ETag::strong("v1").to_string(), "\"v1\"");
    /// ```
    pub fn strong(tag: impl fmt::Display) -> Self {
        Self {
            weak: false,
            tag: encode(&tag.to_string()),
            octets: None,
        }
    }

    /// A weak entity tag (`W/"…"`): never matches in `If-Match`, which
    /// compares strongly.
    ///
    /// ```
    /// assert_eq!(idem::http::ETag::weak("v1").to_string(), "W/\"v1\"");
    /// ```
    pub fn weak(tag: impl fmt::Display) -> Self {
        Self {
            weak: true,
            tag: encode(&tag.to_string()),
            octets: None,
        }
    }

    /// One entity tag as a header holds it (`"v1"` or `W/"v1"`), or `None`.
    ///
    /// ```
    /// use idem::http::ETag;
    /// assert_eq!(ETag::parse(b" \"v1\" "), Some(ETag::strong("v1")));
    /// assert_eq!(ETag::parse(b"v1"), None);
    /// assert_eq!(ETag::parse(b"\"a\", \"b\""), None);
    /// ```
    pub fn parse(value: &[u8]) -> Option<Self> {
        match parse_list(value) {
            Ok(tags) if tags.len() == 1 => tags.into_iter().next(),
            _ => None,
        }
    }

    /// The opaque tag, without quotes or `W/`. A tag parsed from a header
    /// with octets from 0x80 (obs-text) that are not UTF-8 reads here with
    /// U+FFFD in their place; comparisons ([`strong_eq`](Self::strong_eq),
    /// `==`) and the header value keep the octets.
    ///
    /// ```
    /// assert_eq!(idem::http::ETag::weak("v1").tag(), "v1");
    /// ```
    pub fn tag(&self) -> &str {
        &self.tag
    }

    /// Whether the tag is weak.
    ///
    /// ```
    /// assert!(idem::http::ETag::weak("v1").is_weak());
    /// ```
    pub fn is_weak(&self) -> bool {
        self.weak
    }

    /// Strong comparison (RFC 9110 §8.8.3.2): both strong and the same
    /// tag, octet by octet.
    ///
    /// ```
    /// use idem::http::ETag;
    /// assert!(ETag::strong(1).strong_eq(&ETag::strong(1)));
    /// assert!(!ETag::weak(1).strong_eq(&ETag::weak(1)));
    /// ```
    pub fn strong_eq(&self, other: &ETag) -> bool {
        !self.weak && !other.weak && self.octets() == other.octets()
    }

    /// The opaque tag's octets, as they were parsed or encoded.
    fn octets(&self) -> &[u8] {
        self.octets.as_deref().unwrap_or(self.tag.as_bytes())
    }

    fn header_value(&self) -> HeaderValue {
        let weak: &[u8] = if self.weak { b"W/" } else { b"" };
        let value = [weak, b"\"", self.octets(), b"\""].concat();
        // Only `etagc` and obs-text bytes, quotes and `W/`: always a valid
        // value.
        HeaderValue::from_bytes(&value).unwrap_or(HeaderValue::from_static("\"\""))
    }
}

impl fmt::Display for ETag {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let weak = if self.weak { "W/" } else { "" };
        write!(f, "{weak}\"{}\"", self.tag)
    }
}

/// The `ETag` header's value.
impl From<&ETag> for HeaderValue {
    fn from(etag: &ETag) -> Self {
        etag.header_value()
    }
}

/// The `ETag` header's value.
impl From<ETag> for HeaderValue {
    fn from(etag: ETag) -> Self {
        etag.header_value()
    }
}

/// Sets the response's `ETag` header.
impl IntoResponseParts for ETag {
    type Error = Infallible;

    fn into_response_parts(self, mut res: ResponseParts) -> Result<ResponseParts, Self::Error> {
        res.headers_mut().insert(header::ETAG, self.header_value());
        Ok(res)
    }
}

/// `etagc` (`%x21 / %x23-7E`, obs-text aside) but `%`, which escapes.
fn encode(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for byte in text.bytes() {
        if matches!(byte, 0x21 | 0x23..=0x7e) && byte != b'%' {
            out.push(char::from(byte));
        } else {
            out.push_str(&format!("%{byte:02X}"));
        }
    }
    out
}

/// An `If-Match` header (RFC 9110 §13.1.1): `*` or a list of entity tags,
/// compared strongly, so a weak tag never matches. An axum extractor: a
/// missing header is 428 (`Option<IfMatch>` makes it optional, see
/// [`require_if_match`]); a malformed one is 400 `invalid-if-match`.
///
/// An update checks the version it was made against with
/// [`check`](Self::check) (412 when it moved on), then changes the resource
/// and its version together. With an `Idempotency-Key` as well, a retry of
/// an update that completed gets its stored answer, even though the
/// version has moved on since; 412 and 428 are never stored, so a
/// corrected retry with the same key runs.
///
/// ```
/// use axum::{Json, http::StatusCode};
/// use idem::http::{ETag, IfMatch, Problem};
///
/// async fn update(if_match: IfMatch, Json(limit): Json<u64>) -> Result<(StatusCode, ETag), Problem> {
///     let current = ETag::strong(3); // read with the resource
///     if_match.check(&current)?;
///     // … write the new limit and version 4 atomically …
///     Ok((StatusCode::OK, ETag::strong(4)))
/// }
///
/// let if_match = IfMatch::parse(br#""2", "3""#).unwrap();
/// assert!(if_match.check(&ETag::strong(3)).is_ok());
/// assert_eq!(if_match.check(&ETag::strong(4)).unwrap_err().status(), 412);
/// assert!(IfMatch::parse(b"*").unwrap().check(&ETag::strong(4)).is_ok());
/// assert!(IfMatch::parse(br#"W/"3""#).unwrap().check(&ETag::strong(3)).is_err());
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IfMatch {
    any: bool,
    tags: Vec<ETag>,
}

impl IfMatch {
    /// Parses one `If-Match` field value.
    ///
    /// ```
    /// use idem::http::IfMatch;
    /// assert!(IfMatch::parse(b"*").unwrap().is_any());
    /// assert_eq!(IfMatch::parse(br#""a,b", W/"c""#).unwrap().tags().len(), 2);
    /// assert_eq!(IfMatch::parse(b"v1").unwrap_err().status(), 400);
    /// ```
    pub fn parse(value: &[u8]) -> Result<Self, Problem> {
        Self::from_values([value])
    }

    /// The `If-Match` of a request's headers (all its fields, as one list):
    /// `Ok(None)` when there is none, 400 when it is malformed.
    ///
    /// ```
    /// use axum::http::HeaderMap;
    /// use idem::http::{ETag, IfMatch};
    ///
    /// let mut headers = HeaderMap::new();
    /// assert_eq!(IfMatch::from_headers(&headers).unwrap(), None);
    /// headers.append("if-match", "\"1\"".parse().unwrap());
    /// headers.append("if-match", "\"2\"".parse().unwrap());
    /// let if_match = IfMatch::from_headers(&headers).unwrap().unwrap();
    /// assert!(if_match.check(&ETag::strong(2)).is_ok());
    /// ```
    pub fn from_headers(headers: &HeaderMap) -> Result<Option<Self>, Problem> {
        let mut values = headers.get_all(header::IF_MATCH).iter().peekable();
        if values.peek().is_none() {
            return Ok(None);
        }
        Self::from_values(values.map(HeaderValue::as_bytes)).map(Some)
    }

    fn from_values<'a>(values: impl IntoIterator<Item = &'a [u8]>) -> Result<Self, Problem> {
        let mut any = false;
        let mut tags = Vec::new();
        for value in values {
            if value.trim_ascii() == b"*" {
                any = true;
            } else {
                tags.extend(parse_list(value).map_err(invalid)?);
            }
        }
        if any && !tags.is_empty() {
            return Err(invalid("`*` cannot be listed with entity tags"));
        }
        Ok(Self { any, tags })
    }

    /// Whether it is `If-Match: *` (any current version).
    ///
    /// ```
    /// assert!(idem::http::IfMatch::parse(b"*").unwrap().is_any());
    /// ```
    pub fn is_any(&self) -> bool {
        self.any
    }

    /// The entity tags listed (none for `*`).
    ///
    /// ```
    /// let if_match = idem::http::IfMatch::parse(br#""1", "2""#).unwrap();
    /// assert_eq!(if_match.tags()[1].tag(), "2");
    /// ```
    pub fn tags(&self) -> &[ETag] {
        &self.tags
    }

    /// Whether `current` (the resource's version now) passes: `*`, or a
    /// listed tag strongly equal to it.
    ///
    /// ```
    /// use idem::http::{ETag, IfMatch};
    /// assert!(IfMatch::parse(br#""1""#).unwrap().matches(&ETag::strong(1)));
    /// assert!(!IfMatch::parse(br#""1""#).unwrap().matches(&ETag::weak(1)));
    /// ```
    pub fn matches(&self, current: &ETag) -> bool {
        self.any || self.tags.iter().any(|tag| tag.strong_eq(current))
    }

    /// `Ok` when [`matches`](Self::matches), otherwise 412 Precondition
    /// Failed (`precondition-failed`): the resource changed since the
    /// version the client knows. For a resource that does not exist, answer
    /// 412 without calling this (RFC 9110: even `*` fails then).
    ///
    /// ```
    /// use idem::http::{ETag, IfMatch};
    /// let stale = IfMatch::parse(br#""1""#).unwrap();
    /// assert_eq!(stale.check(&ETag::strong(2)).unwrap_err().status(), 412);
    /// ```
    pub fn check(&self, current: &ETag) -> Result<(), Problem> {
        if self.matches(current) {
            return Ok(());
        }
        Err(Problem::new(
            412,
            "precondition-failed",
            "Precondition failed",
            "The resource changed since the version named in If-Match; nothing was changed. Read it again and retry against its current version.",
        ))
    }
}

/// The `If-Match` a request must carry: 428 Precondition Required
/// (`precondition-required`) when it has none.
///
/// ```
/// use idem::http::{IfMatch, require_if_match};
///
/// assert_eq!(require_if_match(None).unwrap_err().status(), 428);
/// assert!(require_if_match(Some(IfMatch::parse(b"*").unwrap())).is_ok());
/// ```
pub fn require_if_match(if_match: Option<IfMatch>) -> Result<IfMatch, Problem> {
    if_match.ok_or_else(|| {
        Problem::new(
            428,
            "precondition-required",
            "Precondition required",
            "This request must name the version it changes: send If-Match with the ETag you read.",
        )
    })
}

/// 428 when the header is missing, 400 when it is malformed.
impl<S: Send + Sync> FromRequestParts<S> for IfMatch {
    type Rejection = Problem;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, Self::Rejection> {
        require_if_match(Self::from_headers(&parts.headers)?)
    }
}

/// `None` when the header is missing, 400 when it is malformed.
impl<S: Send + Sync> OptionalFromRequestParts<S> for IfMatch {
    type Rejection = Problem;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Option<Self>, Self::Rejection> {
        Self::from_headers(&parts.headers)
    }
}

fn invalid(reason: &str) -> Problem {
    Problem::new(
        400,
        "invalid-if-match",
        "Invalid If-Match",
        format!("If-Match must be `*` or a list of quoted entity tags: {reason}."),
    )
}

/// `#entity-tag` (RFC 9110 §5.6.1: empty elements allowed).
fn parse_list(mut rest: &[u8]) -> Result<Vec<ETag>, &'static str> {
    let mut tags = Vec::new();
    loop {
        rest = trim_ows(rest);
        match rest.first() {
            None => return Ok(tags),
            Some(b',') => {
                rest = &rest[1..];
                continue;
            }
            Some(_) => {}
        }
        let weak = rest.starts_with(b"W/");
        if weak {
            rest = &rest[2..];
        }
        let Some(quoted) = rest.strip_prefix(b"\"") else {
            return Err("an entity tag is quoted, e.g. \"v1\" or W/\"v1\"");
        };
        let Some(end) = quoted.iter().position(|&b| b == b'"') else {
            return Err("an entity tag is not terminated");
        };
        let opaque = &quoted[..end];
        if !opaque
            .iter()
            .all(|&b| matches!(b, 0x21 | 0x23..=0x7e | 0x80..))
        {
            return Err("an entity tag holds a character it may not");
        }
        let (tag, octets) = match std::str::from_utf8(opaque) {
            Ok(text) => (text.to_owned(), None),
            Err(_) => (
                String::from_utf8_lossy(opaque).into_owned(),
                Some(opaque.into()),
            ),
        };
        tags.push(ETag { weak, tag, octets });
        rest = trim_ows(&quoted[end + 1..]);
        match rest.split_first() {
            None => return Ok(tags),
            Some((b',', after)) => rest = after,
            Some(_) => return Err("entity tags are separated by commas"),
        }
    }
}

fn trim_ows(value: &[u8]) -> &[u8] {
    let start = value
        .iter()
        .position(|&b| b != b' ' && b != b'\t')
        .unwrap_or(value.len());
    &value[start..]
}

#[doc(hidden)]
/// The `If-Match` parser on arbitrary input, for the fuzz target.
pub fn fuzz_if_match(value: &[u8]) -> bool {
    IfMatch::parse(value).is_ok_and(|if_match| if_match.matches(&ETag::strong(value.len())))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tags(value: &str) -> Vec<String> {
        IfMatch::parse(value.as_bytes())
            .unwrap_or_else(|p| panic!("{value}: {}", p.detail()))
            .tags()
            .iter()
            .map(ToString::to_string)
            .collect()
    }

    #[test]
    fn lists_of_tags() {
        assert_eq!(tags(r#""a""#), [r#""a""#]);
        assert_eq!(
            tags(r#" "a" ,W/"b",, "c,d" "#),
            [r#""a""#, r#"W/"b""#, r#""c,d""#]
        );
        assert_eq!(tags(""), Vec::<String>::new());
        assert_eq!(tags(r#""""#), [r#""""#]);
        for bad in [
            r#"a"#,
            r#""a"#,
            r#""a" "b""#,
            r#"w/"a""#,
            "\"a b\"",
            "*, \"a\"",
        ] {
            assert_eq!(
                IfMatch::parse(bad.as_bytes()).unwrap_err().status(),
                400,
                "{bad}"
            );
        }
    }

    #[test]
    fn strong_comparison_only() {
        let list = IfMatch::parse(br#"W/"1", "2""#).unwrap();
        assert!(!list.matches(&ETag::strong(1)));
        assert!(!list.matches(&ETag::weak(1)));
        assert!(list.matches(&ETag::strong(2)));
        assert!(!list.matches(&ETag::weak(2)));
        assert!(IfMatch::parse(b"*").unwrap().matches(&ETag::weak(9)));
    }

    /// RFC 9110 §8.8.3.2: octet by octet. Read as text, both tags were
    /// `v1-\u{FFFD}` and a stale `If-Match` passed.
    #[test]
    fn obs_text_tags_compare_by_their_octets() {
        let (fe, ff) = (&b"\"v1-\xfe\""[..], &b"\"v1-\xff\""[..]);
        let current = ETag::parse(ff).unwrap();
        assert!(!IfMatch::parse(fe).unwrap().matches(&current));
        assert!(IfMatch::parse(ff).unwrap().matches(&current));
        assert_ne!(ETag::parse(fe).unwrap(), current);
        assert!(!ETag::parse(fe).unwrap().strong_eq(&current));
        assert_eq!(HeaderValue::from(&current).as_bytes(), ff);
        // UTF-8 octets are kept as text, and compare the same either way.
        let e_acute = "\"v1-\u{e9}\"".as_bytes();
        assert_eq!(ETag::parse(e_acute).unwrap().tag(), "v1-\u{e9}");
        assert!(
            IfMatch::parse(e_acute)
                .unwrap()
                .matches(&ETag::parse(e_acute).unwrap())
        );
    }

    #[test]
    fn any_text_is_a_valid_distinct_tag() {
        let odd = ETag::strong("a \"b\" 50% é");
        assert_eq!(odd.tag(), "a%20%22b%22%2050%25%20%C3%A9");
        assert_eq!(ETag::parse(HeaderValue::from(&odd).as_bytes()), Some(odd));
        assert_ne!(ETag::strong("%20"), ETag::strong(" "));
    }
}
