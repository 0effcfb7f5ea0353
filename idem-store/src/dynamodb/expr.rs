//! Expression attribute names and values: each request sends only those
//! its expressions name (DynamoDB refuses unused ones), and every
//! attribute by a `#name`, so no attribute name collides with one of
//! DynamoDB's reserved words.

use std::collections::HashMap;

use aws_sdk_dynamodb::types::AttributeValue;

use super::DynamoDbStore;

/// The `#names` and `:values` of one request.
#[derive(Debug, Default)]
pub(super) struct Expr {
    values: Vec<(&'static str, AttributeValue)>,
}

/// The names and values a request's expressions use.
pub(super) type Bound = (
    Option<HashMap<String, String>>,
    Option<HashMap<String, AttributeValue>>,
);

impl Expr {
    pub(super) fn new() -> Self {
        Self::default()
    }

    /// Binds `:name` (without its colon) to `value`.
    pub(super) fn value(mut self, name: &'static str, value: AttributeValue) -> Self {
        self.values.push((name, value));
        self
    }

    /// The names and values `expressions` use: `#pk`, `#sk` and `#ttl`
    /// are the store's attributes of those roles, any other `#name` the
    /// attribute `name`.
    pub(super) fn bind(&self, store: &DynamoDbStore, expressions: &[&str]) -> Bound {
        let mut names = HashMap::new();
        let mut values = HashMap::new();
        for expression in expressions {
            for (sigil, word) in words(expression) {
                if sigil == '#' {
                    let attribute = match word {
                        "pk" => store.partition_key.to_string(),
                        "sk" => store.sort_key.to_string(),
                        "ttl" => store.ttl_attribute.to_string(),
                        other => other.to_owned(),
                    };
                    names.insert(format!("#{word}"), attribute);
                } else if let Some((_, value)) = self.values.iter().find(|(n, _)| *n == word) {
                    values.insert(format!(":{word}"), value.clone());
                }
            }
        }
        (
            (!names.is_empty()).then_some(names),
            (!values.is_empty()).then_some(values),
        )
    }
}

/// The `#name` and `:name` words of `expression`, with their sigil.
fn words(expression: &str) -> impl Iterator<Item = (char, &str)> {
    let mut rest = expression;
    std::iter::from_fn(move || {
        let start = rest.find(['#', ':'])?;
        let sigil = rest[start..].chars().next()?;
        let tail = &rest[start + 1..];
        let end = tail
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .unwrap_or(tail.len());
        rest = &tail[end..];
        Some((sigil, &tail[..end]))
    })
}

#[cfg(test)]
mod tests {
    use super::words;

    #[test]
    fn words_are_read_whole() {
        let found: Vec<_> = words("#st = :p AND (#exp <= :now OR :nows)").collect();
        assert_eq!(
            found,
            [
                ('#', "st"),
                (':', "p"),
                ('#', "exp"),
                (':', "now"),
                (':', "nows")
            ]
        );
    }
}
