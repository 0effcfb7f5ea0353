//! The annotated item: an `async fn`, the fn `#[async_trait]` made of one
//! (recognised by its boxed future, as tracing's `#[instrument]` does), or
//! a clear error at the token that shows why it is neither.

use proc_macro2::{Span, TokenStream};
use syn::spanned::Spanned;
use syn::{
    Block, Expr, ExprAsync, GenericArgument, Item, ItemFn, PathArguments, ReturnType, Signature,
    Stmt, Type, TypeParamBound,
};

/// The fn to expand. For a fn that `#[async_trait]` rewrote, `func` is the
/// `async fn` the user wrote, rebuilt from the rewritten one (its inputs,
/// the `Output` of its boxed future as the return type, the block inside
/// `Box::pin(async move { … })`), and `boxed` is the rewritten fn, whose
/// inner block the expansion replaces.
pub(crate) struct Annotated {
    pub func: ItemFn,
    pub boxed: Option<ItemFn>,
}

pub(crate) fn async_fn(item: TokenStream) -> syn::Result<Annotated> {
    let parsed: Item = syn::parse2(item)?;
    let Item::Fn(func) = parsed else {
        return Err(syn::Error::new(
            item_keyword_span(&parsed),
            "`#[idempotent]` goes on an `async fn` that returns a `Result`, not on this item",
        ));
    };
    if func.sig.asyncness.is_some() {
        return Ok(Annotated { func, boxed: None });
    }
    if rewritten_by_async_trait(&func.sig) {
        if let Some(native) = unboxed(&func) {
            return Ok(Annotated {
                func: native,
                boxed: Some(func),
            });
        }
        return Err(syn::Error::new(
            func.sig.fn_token.span,
            "`#[async_trait]` turned this `async fn` into a fn returning `Pin<Box<dyn Future>>` in a shape `#[idempotent]` does not know (an async-trait older than 0.1.50?), so it cannot wrap its body; update async-trait, or annotate an inherent `async fn` with `#[idempotent]` and call it from the trait method",
        ));
    }
    Err(syn::Error::new(
        func.sig.fn_token.span,
        "`#[idempotent]` needs an `async fn`: a call may have to wait for the store, so the function must be able to await; write `async fn`",
    ))
}

/// Whether `#[async_trait]` rewrote this signature: its lifetimes are
/// named `'async_trait` and `'life0`, `'life1`, ….
fn rewritten_by_async_trait(sig: &Signature) -> bool {
    sig.generics.lifetimes().any(|def| {
        let name = def.lifetime.ident.to_string();
        name == "async_trait" || name.starts_with("life")
    })
}

/// The `async fn` behind async-trait's shape: a fn returning
/// `Pin<Box<dyn Future<Output = T> + Send + 'async_trait>>` whose last
/// statement is `Box::pin(async move { … })`. `None` for any other shape.
fn unboxed(func: &ItemFn) -> Option<ItemFn> {
    let output = future_output(&func.sig.output)?;
    let inner = boxed_async(&func.block)?;
    let mut native = func.clone();
    native.sig.asyncness = Some(syn::Token![async](func.sig.fn_token.span));
    // async-trait writes `Output = ()` for a fn without a return type: it
    // is reported as the missing `Result` it is, at the parentheses.
    native.sig.output = match output {
        Type::Tuple(unit) if unit.elems.is_empty() => ReturnType::Default,
        ty => ReturnType::Type(Default::default(), Box::new(ty.clone())),
    };
    native.block = Box::new(inner.block.clone());
    allow_unused_rebindings(&mut native.block);
    Some(native)
}

/// async-trait moves each parameter into its future with `let x = x;`.
/// A parameter that only the key or the fingerprint reads (used, on a
/// native `async fn`) would warn there as an unused variable.
fn allow_unused_rebindings(block: &mut Block) {
    for stmt in &mut block.stmts {
        let Stmt::Local(local) = stmt else { continue };
        let (syn::Pat::Ident(pat), Some(init)) = (&local.pat, &local.init) else {
            continue;
        };
        if matches!(&*init.expr, Expr::Path(path) if path.path.is_ident(&pat.ident)) {
            local
                .attrs
                .push(syn::parse_quote!(#[allow(unused_variables)]));
        }
    }
}

/// `T` in `Pin<Box<dyn Future<Output = T> + …>>`.
fn future_output(output: &ReturnType) -> Option<&Type> {
    let ReturnType::Type(_, ty) = output else {
        return None;
    };
    let pinned = last_type_arg(ty, "Pin")?;
    let Type::TraitObject(object) = last_type_arg(pinned, "Box")? else {
        return None;
    };
    object.bounds.iter().find_map(|bound| {
        let TypeParamBound::Trait(bound) = bound else {
            return None;
        };
        let future = bound.path.segments.last()?;
        let PathArguments::AngleBracketed(args) = &future.arguments else {
            return None;
        };
        args.args.iter().find_map(|arg| match arg {
            GenericArgument::AssocType(assoc) if assoc.ident == "Output" => Some(&assoc.ty),
            _ => None,
        })
    })
}

/// The one type argument of a path type whose last segment is `name`.
fn last_type_arg<'a>(ty: &'a Type, name: &str) -> Option<&'a Type> {
    let Type::Path(path) = ty else { return None };
    let last = path.path.segments.last()?;
    if last.ident != name {
        return None;
    }
    let PathArguments::AngleBracketed(args) = &last.arguments else {
        return None;
    };
    args.args.iter().find_map(|arg| match arg {
        GenericArgument::Type(ty) => Some(ty),
        _ => None,
    })
}

/// The `async move { … }` in a block whose last statement is
/// `Box::pin(async move { … })`.
pub(crate) fn boxed_async(block: &Block) -> Option<&ExprAsync> {
    let Some(Stmt::Expr(Expr::Call(call), None)) = block.stmts.last() else {
        return None;
    };
    let Expr::Path(path) = &*call.func else {
        return None;
    };
    let names: Vec<String> = path
        .path
        .segments
        .iter()
        .map(|s| s.ident.to_string())
        .collect();
    if !names.ends_with(&["Box".to_owned(), "pin".to_owned()]) || call.args.len() != 1 {
        return None;
    }
    match call.args.first()? {
        Expr::Async(inner) if inner.capture.is_some() => Some(inner),
        _ => None,
    }
}

/// The same, mutably: where the expansion puts its body.
pub(crate) fn boxed_async_mut(block: &mut Block) -> Option<&mut ExprAsync> {
    boxed_async(block)?;
    let Some(Stmt::Expr(Expr::Call(call), None)) = block.stmts.last_mut() else {
        return None;
    };
    match call.args.first_mut()? {
        Expr::Async(inner) => Some(inner),
        _ => None,
    }
}

/// The keyword that says what an item is (`struct`, `impl`, …), to point
/// at.
fn item_keyword_span(item: &Item) -> Span {
    match item {
        Item::Struct(item) => item.struct_token.span,
        Item::Enum(item) => item.enum_token.span,
        Item::Impl(item) => item.impl_token.span,
        Item::Trait(item) => item.trait_token.span,
        Item::Mod(item) => item.mod_token.span,
        Item::Const(item) => item.const_token.span,
        Item::Static(item) => item.static_token.span,
        Item::Type(item) => item.type_token.span,
        other => other.span(),
    }
}
