//! The attribute's options, parsed into a typed model. Every mistake is
//! collected, so the user sees all of them at once, each at its token.

use proc_macro2::Span;
use syn::parse::{Parse, ParseStream};
use syn::punctuated::Punctuated;
use syn::{Expr, Ident, Lit, LitStr, Path, Token};

use crate::diagnostics::Diagnostics;
use crate::duration;

/// The options of one `#[idempotent(...)]`. Each is kept with the span of
/// its keyword, so later checks can point at it.
#[derive(Default)]
pub(crate) struct Args {
    pub key: Option<Expr>,
    pub scope: Option<Expr>,
    pub ttl: Option<Duration>,
    pub lease: Option<Duration>,
    pub wait: Option<Duration>,
    /// `tombstone = …`: how long a marker outlives the record.
    pub tombstone: Option<Duration>,
    pub store: Option<Expr>,
    pub fingerprint: Option<Fingerprint>,
    pub skip: Vec<Ident>,
    pub errors: Option<Errors>,
    /// `mismatch = "refuse" | "rerun"`: what another payload under a
    /// completed key gets.
    pub mismatch: Option<Mismatch>,
    /// The span of the `detach` flag, when given.
    pub detach: Option<Span>,
    /// `version = …`: the version of the fn's stored values.
    pub version: Option<Expr>,
    /// `reconcile = path`: asked instead of the body on a takeover.
    pub reconcile: Option<Path>,
    pub krate: Option<Path>,
}

pub(crate) enum Duration {
    /// A literal, already checked: milliseconds and the literal's span.
    Literal { millis: u64, span: Span },
    /// An expression of type `std::time::Duration`.
    Expr(Expr),
}

pub(crate) enum Fingerprint {
    Disabled,
    Expr(Expr),
}

/// `mismatch = …`, with the span of its literal.
pub(crate) enum Mismatch {
    Refuse,
    Rerun(Span),
}

pub(crate) enum Errors {
    Release,
    Replay(Span),
    Predicate(Path),
}

const OPTIONS: &[&str] = &[
    "key",
    "scope",
    "ttl",
    "lease",
    "wait",
    "tombstone",
    "store",
    "fingerprint",
    "skip",
    "errors",
    "mismatch",
    "detach",
    "version",
    "reconcile",
    "crate",
];

impl Parse for Args {
    fn parse(input: ParseStream<'_>) -> syn::Result<Self> {
        let mut args = Args::default();
        let mut diagnostics = Diagnostics::default();
        let mut seen: Vec<(String, Span)> = Vec::new();
        while !input.is_empty() {
            let (name, span) = if input.peek(Token![crate]) {
                let token: Token![crate] = input.parse()?;
                ("crate".to_owned(), token.span)
            } else {
                let ident: Ident = input.parse().map_err(|e| {
                    syn::Error::new(
                        e.span(),
                        "expected an option such as `key = …` or `ttl = \"24h\"`",
                    )
                })?;
                (ident.to_string(), ident.span())
            };
            if let Some((_, first)) = seen.iter().find(|(seen, _)| *seen == name) {
                let mut error = syn::Error::new(
                    span,
                    format!("`{name}` is given twice; give each option at most once"),
                );
                error.combine(syn::Error::new(
                    *first,
                    format!("`{name}` was first given here"),
                ));
                diagnostics.push(error);
            }
            seen.push((name.clone(), span));
            if name == "skip" {
                let content;
                syn::parenthesized!(content in input);
                let names = Punctuated::<Ident, Token![,]>::parse_terminated(&content)?;
                args.skip.extend(names);
            } else if name == "detach" {
                if input.peek(Token![=]) {
                    diagnostics.push(syn::Error::new(
                        input.span(),
                        "`detach` is a flag and takes no value: write `detach`",
                    ));
                    input.parse::<Token![=]>()?;
                    input.parse::<Expr>()?;
                }
                args.detach = Some(span);
            } else {
                input.parse::<Token![=]>().map_err(|e| {
                    syn::Error::new(
                        e.span(),
                        format!("expected `=` after `{name}`, as in `{name} = …`"),
                    )
                })?;
                let value: Expr = input.parse()?;
                if let Err(error) = args.set(&name, span, value) {
                    diagnostics.push(error);
                }
            }
            if input.is_empty() {
                break;
            }
            input.parse::<Token![,]>()?;
        }
        args.check_lease(&mut diagnostics);
        diagnostics.finish()?;
        Ok(args)
    }
}

impl Args {
    fn set(&mut self, name: &str, span: Span, value: Expr) -> syn::Result<()> {
        match name {
            "key" => self.key = Some(value),
            "scope" => self.scope = Some(value),
            "store" => self.store = Some(value),
            "version" => self.version = Some(value),
            "ttl" => self.ttl = Some(duration_option(name, value, false)?),
            "lease" => self.lease = Some(duration_option(name, value, false)?),
            "wait" => self.wait = Some(duration_option(name, value, true)?),
            "tombstone" => self.tombstone = Some(duration_option(name, value, false)?),
            "fingerprint" => {
                self.fingerprint = Some(match value {
                    Expr::Lit(syn::ExprLit {
                        lit: Lit::Bool(b), ..
                    }) if !b.value => Fingerprint::Disabled,
                    Expr::Lit(syn::ExprLit {
                        lit: Lit::Bool(b), ..
                    }) => {
                        return Err(syn::Error::new(
                            b.span,
                            "`fingerprint = true` is the default; give an expression to fingerprint, or `false` to turn fingerprinting off",
                        ));
                    }
                    other => Fingerprint::Expr(other),
                })
            }
            "errors" => self.errors = Some(errors_option(value)?),
            "mismatch" => self.mismatch = Some(mismatch_option(value)?),
            "reconcile" => match value {
                Expr::Path(path) => self.reconcile = Some(path.path),
                other => {
                    return Err(syn::Error::new_spanned(
                        other,
                        "`reconcile = …` takes the path of an async fn taking this fn's parameters by reference and returning `Result<Option<T>, E>`",
                    ));
                }
            },
            "crate" => match value {
                Expr::Path(path) => self.krate = Some(path.path),
                other => {
                    return Err(syn::Error::new_spanned(
                        other,
                        "`crate = …` takes a path, such as `crate = ::my_facade::idem`",
                    ));
                }
            },
            unknown => {
                let hint = closest(unknown)
                    .map(|known| format!("; did you mean `{known}`?"))
                    .unwrap_or_default();
                return Err(syn::Error::new(
                    span,
                    format!(
                        "unknown option `{unknown}`{hint}\nthe options are: {}",
                        OPTIONS.join(", ")
                    ),
                ));
            }
        }
        Ok(())
    }

    fn check_lease(&self, diagnostics: &mut Diagnostics) {
        let ttl = match &self.ttl {
            Some(Duration::Literal { millis, .. }) => *millis,
            Some(Duration::Expr(_)) => return,
            None => DEFAULT_TTL_MILLIS,
        };
        if let Some(Duration::Literal { millis, span }) = &self.lease
            && *millis > ttl
        {
            diagnostics.push(syn::Error::new(
                *span,
                format!("`lease` ({millis} ms) is longer than `ttl` ({ttl} ms); a claim may not outlive the record it guards"),
            ));
        }
    }
}

/// The runtime's default TTL, 24 hours, for the lease check.
const DEFAULT_TTL_MILLIS: u64 = 24 * 60 * 60 * 1000;

fn duration_option(name: &str, value: Expr, zero_ok: bool) -> syn::Result<Duration> {
    let lit = match value {
        Expr::Lit(syn::ExprLit {
            lit: Lit::Str(lit), ..
        }) => lit,
        Expr::Lit(other) => {
            return Err(syn::Error::new_spanned(
                other,
                format!(
                    "`{name}` takes a duration string such as \"30s\", or a `std::time::Duration` expression"
                ),
            ));
        }
        other => return Ok(Duration::Expr(other)),
    };
    let millis =
        duration::parse_millis(&lit.value()).map_err(|msg| syn::Error::new(lit.span(), msg))?;
    if millis == 0 && !zero_ok {
        return Err(syn::Error::new(
            lit.span(),
            format!("`{name}` must be longer than zero"),
        ));
    }
    Ok(Duration::Literal {
        millis,
        span: lit.span(),
    })
}

fn errors_option(value: Expr) -> syn::Result<Errors> {
    match value {
        Expr::Lit(syn::ExprLit {
            lit: Lit::Str(lit), ..
        }) => match lit.value().as_str() {
            "release" => Ok(Errors::Release),
            "replay" => Ok(Errors::Replay(lit.span())),
            other => Err(unknown_errors(&lit, other)),
        },
        Expr::Path(path) => Ok(Errors::Predicate(path.path)),
        other => Err(syn::Error::new_spanned(
            other,
            "`errors` takes \"release\", \"replay\", or the path of a `fn(&E) -> bool` that says which errors to store",
        )),
    }
}

fn mismatch_option(value: Expr) -> syn::Result<Mismatch> {
    const CHOICES: &str = "\"refuse\" (another payload under a used key is `FingerprintMismatch`; the default) or \"rerun\" (the key names a resource: another payload runs and its record replaces the old one)";
    match value {
        Expr::Lit(syn::ExprLit {
            lit: Lit::Str(lit), ..
        }) => match lit.value().as_str() {
            "refuse" => Ok(Mismatch::Refuse),
            "rerun" => Ok(Mismatch::Rerun(lit.span())),
            other => Err(syn::Error::new(
                lit.span(),
                format!("unknown mismatch policy \"{other}\"; use {CHOICES}"),
            )),
        },
        other => Err(syn::Error::new_spanned(
            other,
            format!("`mismatch` takes {CHOICES}"),
        )),
    }
}

fn unknown_errors(lit: &LitStr, value: &str) -> syn::Error {
    syn::Error::new(
        lit.span(),
        format!(
            "unknown error policy \"{value}\"; use \"release\" (a retry runs the body again), \"replay\" (the error is stored and replayed), or the path of a `fn(&E) -> bool`"
        ),
    )
}

/// The known option nearest to a misspelled one, if any is near.
fn closest(unknown: &str) -> Option<&'static str> {
    OPTIONS
        .iter()
        .map(|known| (edit_distance(unknown, known), *known))
        .filter(|(distance, known)| *distance <= known.len().max(3) / 3 + 1)
        .min_by_key(|(distance, _)| *distance)
        .map(|(_, known)| known)
}

fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut diagonal = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let above = row[j + 1];
            row[j + 1] = (above + 1)
                .min(row[j] + 1)
                .min(diagonal + usize::from(ca != *cb));
            diagonal = above;
        }
    }
    row[b.len()]
}

#[cfg(test)]
mod tests {
    use super::closest;

    #[test]
    fn suggestions() {
        assert_eq!(closest("tll"), Some("ttl"));
        assert_eq!(closest("leas"), Some("lease"));
        assert_eq!(closest("fingerprnt"), Some("fingerprint"));
        assert_eq!(closest("banana"), None);
    }
}
