//! Versions: entity tags and `If-Match` (RFC 9110 §8.8.3 and §13.1.1), so
//! an update names the version it was made against and a stale one is
//! refused instead of overwriting a newer state. Here the entity tag and
//! its syntax; the precondition, `If-Match`, in `if_match.rs`.

use std::convert::Infallible;
use std::fmt;

use axum::http::{HeaderValue, header};
use axum::response::{IntoResponseParts, ResponseParts};

mod if_match;

#[cfg(fuzzing)]
pub use if_match::fuzz_if_match;
pub use if_match::{IfMatch, require_if_match};

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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn any_text_is_a_valid_distinct_tag() {
        let odd = ETag::strong("a \"b\" 50% é");
        assert_eq!(odd.tag(), "a%20%22b%22%2050%25%20%C3%A9");
        assert_eq!(ETag::parse(HeaderValue::from(&odd).as_bytes()), Some(odd));
        assert_ne!(ETag::strong("%20"), ETag::strong(" "));
    }
}
