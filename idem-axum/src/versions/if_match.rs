//! `If-Match` (RFC 9110 §13.1.1): the precondition an update names, its
//! extractor, and the 412 and 428 answers.

use axum::extract::{FromRequestParts, OptionalFromRequestParts};
use axum::http::request::Parts;
use axum::http::{HeaderMap, HeaderValue, header};

use super::{ETag, parse_list};
use crate::Problem;

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

/// The `If-Match` parser on arbitrary input, for the fuzz target. Only in
/// a fuzzing build (cargo-fuzz sets `--cfg fuzzing`).
#[cfg(fuzzing)]
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
}
