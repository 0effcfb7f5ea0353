//! Duration literals (`"500ms"`, `"1h30m"`, `"7d"`), parsed at compile time.

/// Parses a duration literal into milliseconds, or says what is wrong.
pub(crate) fn parse_millis(text: &str) -> Result<u64, String> {
    const HINT: &str = "write a number and a unit, such as \"500ms\", \"30s\", \"15m\", \"24h\", \"7d\" or \"1h30m\"";
    if text.is_empty() {
        return Err(format!("empty duration; {HINT}"));
    }
    let mut total: u64 = 0;
    let mut rest = text;
    while !rest.is_empty() {
        let digits = rest
            .find(|c: char| !c.is_ascii_digit())
            .unwrap_or(rest.len());
        if digits == 0 {
            return Err(format!("`{text}` is not a duration; {HINT}"));
        }
        let number: u64 = rest[..digits]
            .parse()
            .map_err(|_| format!("`{text}` is too large a duration"))?;
        rest = &rest[digits..];
        let unit_len = rest
            .find(|c: char| c.is_ascii_digit())
            .unwrap_or(rest.len());
        let per_unit: u64 = match &rest[..unit_len] {
            "ms" => 1,
            "s" => 1_000,
            "m" => 60_000,
            "h" => 3_600_000,
            "d" => 86_400_000,
            "" => return Err(format!("`{text}` lacks a unit; {HINT}")),
            unit => return Err(format!("unknown unit `{unit}` in `{text}`; {HINT}")),
        };
        rest = &rest[unit_len..];
        total = number
            .checked_mul(per_unit)
            .and_then(|ms| total.checked_add(ms))
            .ok_or_else(|| format!("`{text}` is too large a duration"))?;
    }
    Ok(total)
}

#[cfg(test)]
mod tests {
    use super::parse_millis;

    #[test]
    fn units_and_compounds() {
        assert_eq!(parse_millis("500ms"), Ok(500));
        assert_eq!(parse_millis("30s"), Ok(30_000));
        assert_eq!(parse_millis("15m"), Ok(900_000));
        assert_eq!(parse_millis("24h"), Ok(86_400_000));
        assert_eq!(parse_millis("7d"), Ok(604_800_000));
        assert_eq!(parse_millis("1h30m"), Ok(5_400_000));
        assert_eq!(parse_millis("0s"), Ok(0));
    }

    #[test]
    fn malformed() {
        for bad in ["", "24x", "-1s", "10", "s", "1.5h", " 1s", "1s "] {
            assert!(parse_millis(bad).is_err(), "{bad:?} accepted");
        }
        assert!(parse_millis("99999999999999999999d").is_err());
    }
}
