//! What the return type says syntactically: the `Ok` and error types of
//! a spelled-out `Result`, and an `Ok` type that borrows (which cannot be
//! decoded from the store).

use syn::{GenericArgument, Lifetime, PathArguments, Type};

/// The `Ok` and error types of a return type spelled `…Result<T, E>` or
/// `…Result<T>` (an alias such as `anyhow::Result<T>`). `None` where the
/// type does not show them; the expansion then names them through
/// `IdempotentReturn`.
pub(crate) struct ReturnShape<'a> {
    pub ok: Option<&'a Type>,
    pub err: Option<&'a Type>,
}

impl<'a> ReturnShape<'a> {
    pub(crate) fn of(ret: &'a Type) -> Self {
        let none = ReturnShape {
            ok: None,
            err: None,
        };
        let ret = unwrap_group(ret);
        let Type::Path(path) = ret else { return none };
        if path.qself.is_some() {
            return none;
        }
        let Some(last) = path.path.segments.last() else {
            return none;
        };
        if last.ident != "Result" {
            return none;
        }
        let PathArguments::AngleBracketed(args) = &last.arguments else {
            return none;
        };
        let types: Vec<&Type> = args
            .args
            .iter()
            .filter_map(|arg| match arg {
                GenericArgument::Type(ty) => Some(ty),
                _ => None,
            })
            .collect();
        match types.as_slice() {
            [ok] => ReturnShape {
                ok: Some(ok),
                err: None,
            },
            [ok, err] => ReturnShape {
                ok: Some(ok),
                err: Some(err),
            },
            _ => none,
        }
    }
}

/// The message and status types of a tonic service method's return type,
/// spelled `…Result<…Response<M>, …Status>`: the expansion stores it
/// through `idem::grpc`, since neither type is serde.
pub(crate) struct TonicShape<'a> {
    pub message: &'a Type,
    pub status: &'a Type,
}

impl<'a> TonicShape<'a> {
    pub(crate) fn of(ret: &'a Type) -> Option<Self> {
        let shape = ReturnShape::of(ret);
        let (ok, err) = (shape.ok?, shape.err?);
        let message = last_segment(ok, "Response")?;
        last_segment(err, "Status")?;
        let PathArguments::AngleBracketed(args) = &message.arguments else {
            return None;
        };
        let mut types = args.args.iter().filter_map(|arg| match arg {
            GenericArgument::Type(ty) => Some(ty),
            _ => None,
        });
        let message = types.next()?;
        types.next().is_none().then_some(TonicShape {
            message,
            status: err,
        })
    }
}

/// The last segment of a path type, if it is `name`.
fn last_segment<'a>(ty: &'a Type, name: &str) -> Option<&'a syn::PathSegment> {
    let Type::Path(path) = unwrap_group(ty) else {
        return None;
    };
    let last = path.path.segments.last()?;
    (path.qself.is_none() && last.ident == name).then_some(last)
}

fn unwrap_group(ty: &Type) -> &Type {
    match ty {
        Type::Group(group) => unwrap_group(&group.elem),
        Type::Paren(paren) => unwrap_group(&paren.elem),
        other => other,
    }
}

/// An `Ok` type that borrows cannot be decoded from the store: one error
/// at each reference and each lifetime other than `'static`.
pub(crate) fn borrowed_ok(ok: &Type, errors: &mut Vec<syn::Error>) {
    const WHY: &str =
        "the `Ok` value is stored and decoded again for every duplicate call, so it cannot borrow";
    match ok {
        Type::Reference(reference) => errors.push(syn::Error::new_spanned(
            reference,
            format!("{WHY}: return an owned type instead of a reference (`String` rather than `&str`, `Vec<T>` rather than `&[T]`)"),
        )),
        Type::Path(path) => {
            if let Some(qself) = &path.qself {
                borrowed_ok(&qself.ty, errors);
            }
            for segment in &path.path.segments {
                let PathArguments::AngleBracketed(args) = &segment.arguments else {
                    continue;
                };
                for arg in &args.args {
                    match arg {
                        GenericArgument::Lifetime(lifetime) => borrowed_lifetime(lifetime, errors),
                        GenericArgument::Type(ty) => borrowed_ok(ty, errors),
                        _ => {}
                    }
                }
            }
        }
        Type::Tuple(tuple) => tuple.elems.iter().for_each(|ty| borrowed_ok(ty, errors)),
        Type::Array(array) => borrowed_ok(&array.elem, errors),
        Type::Slice(slice) => borrowed_ok(&slice.elem, errors),
        Type::Group(group) => borrowed_ok(&group.elem, errors),
        Type::Paren(paren) => borrowed_ok(&paren.elem, errors),
        _ => {}
    }

    fn borrowed_lifetime(lifetime: &Lifetime, errors: &mut Vec<syn::Error>) {
        if lifetime.ident != "static" {
            errors.push(syn::Error::new_spanned(
                lifetime,
                format!("{WHY}: a value decoded from the store lives for `'static`, not `{lifetime}`; use an owned type or `'static` (`Cow<'static, str>`, `String`)"),
            ));
        }
    }
}
