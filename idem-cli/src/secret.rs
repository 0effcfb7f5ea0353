//! Store URLs as the command shows them: never with their password.

use url::Url;

/// A store URL and what of it may be shown.
#[derive(Clone)]
pub(crate) struct StoreUrl {
    raw: String,
    /// The password (as written and percent-decoded), to scrub from any
    /// message that might repeat it.
    secrets: Vec<String>,
    shown: String,
}

/// Query parameters that carry a password (libpq's, which sqlx reads).
const SECRET_PARAMS: [&str; 2] = ["password", "sslpassword"];
const MASK: &str = "***";

impl StoreUrl {
    pub(crate) fn new(raw: &str) -> Self {
        let Ok(mut url) = Url::parse(raw) else {
            // Without a parse, which part is the password is unknown.
            return StoreUrl {
                raw: raw.to_owned(),
                secrets: Vec::new(),
                shown: "(a URL that does not parse; not shown, as it may hold a password)".into(),
            };
        };
        let mut secrets = Vec::new();
        if let Some(password) = url.password().filter(|p| !p.is_empty()) {
            secrets.push(password.to_owned());
            let _ = url.set_password(Some(MASK));
        }
        let pairs: Vec<(String, String)> = url.query_pairs().into_owned().collect();
        if pairs
            .iter()
            .any(|(k, _)| SECRET_PARAMS.contains(&k.as_str()))
        {
            let mut query = url.query_pairs_mut();
            query.clear();
            for (key, value) in &pairs {
                if SECRET_PARAMS.contains(&key.as_str()) {
                    secrets.push(value.clone());
                    query.append_pair(key, MASK);
                } else {
                    query.append_pair(key, value);
                }
            }
        }
        let decoded: Vec<String> = secrets.iter().filter_map(|s| percent_decoded(s)).collect();
        secrets.extend(decoded);
        secrets.retain(|s| !s.is_empty());
        StoreUrl {
            raw: raw.to_owned(),
            secrets,
            shown: url.to_string(),
        }
    }

    /// The URL to connect with.
    pub(crate) fn raw(&self) -> &str {
        &self.raw
    }

    /// The URL to show: its password replaced by `***`.
    pub(crate) fn shown(&self) -> &str {
        &self.shown
    }

    /// `text` with any copy of the password replaced by `***`.
    pub(crate) fn scrub(&self, text: &str) -> String {
        let mut text = text.replace(&self.raw, &self.shown);
        for secret in &self.secrets {
            text = text.replace(secret.as_str(), MASK);
        }
        text
    }
}

fn percent_decoded(text: &str) -> Option<String> {
    let decoded = percent_encoding::percent_decode_str(text)
        .decode_utf8()
        .ok()?;
    (decoded != text).then(|| decoded.into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passwords_are_masked_and_scrubbed() {
        let url = StoreUrl::new("redis://:Sup3r%40Pw@127.0.0.1:1/");
        assert_eq!(url.shown(), "redis://:***@127.0.0.1:1/");
        assert_eq!(
            url.scrub("failed at Sup3r@Pw and Sup3r%40Pw"),
            "failed at *** and ***"
        );
        let url = StoreUrl::new("postgres://u@h/x?sslmode=disable&password=pw1");
        assert_eq!(url.shown(), "postgres://u@h/x?sslmode=disable&password=***");
        assert!(
            !StoreUrl::new("postgres://u:pw@h:1:2/x")
                .shown()
                .contains("pw")
        );
        assert_eq!(
            StoreUrl::new("redis://127.0.0.1:1").shown(),
            "redis://127.0.0.1:1"
        );
    }
}
