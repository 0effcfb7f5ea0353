#!/usr/bin/env python3
"""Renders a crate's public API, one item a line, from rustdoc's JSON.

Usage: public_api.py CRATE.json [DEPENDENCY.json…] > CRATE.txt

Types are named by the path a user writes (`idem::http::IdempotencyLayer`,
not the private module that defines it), in this crate and, through the
other JSON files given, in the workspace crates it re-exports.

Each line names one public item by the path a user writes, with its
signature: modules, types (with `#[non_exhaustive]`), public fields,
variants, functions and methods, trait items (`provided` when they have a
default body), constants, macros, re-exports of other crates' items, and
the trait impls of each type (derived ones and the auto traits included:
losing `Clone` or `Send` breaks users as surely as a removed method).
Blanket impls (`impl<T> From<T> for T`, …) are left out. Items hidden from
the docs (`#[doc(hidden)]`, the macro's `__private`) are not API.

Only the Python standard library: it runs wherever the repository does.
"""

import json
import sys

# The auto traits a user can name on stable; the compiler's others
# (`Freeze`, `UnsafeUnpin`) come and go with the toolchain.
AUTO_TRAITS = {"Send", "Sync", "Unpin", "UnwindSafe", "RefUnwindSafe"}
# Traits the compiler implements with a derive, not API of their own.
HIDDEN_TRAITS = {"StructuralPartialEq"}


class Api:
    def __init__(self, doc, public):
        self.doc = doc
        self.index = doc["index"]
        self.paths = doc["paths"]
        self.lines = set()
        self.seen = set()
        # Defining path -> the shortest public path, across the crates.
        self.public = public
        # Another crate's public path -> where this crate re-exports it.
        self.aliases = {}
        self.emitting = False

    def public_paths(self):
        """Walks the crate once, only to learn each item's public path."""
        self.walk(self.doc["root"], self.index[str(self.doc["root"])]["name"])
        self.seen.clear()

    def render(self):
        self.emitting = True
        self.walk(self.doc["root"], self.index[str(self.doc["root"])]["name"])
        return sorted(self.lines)

    def name(self, item_id, written, alias=True):
        known = self.paths.get(str(item_id))
        if not known:
            return written
        defined = "::".join(known["path"])
        path = self.public.get(defined, defined)
        if not alias:
            return path
        parts = path.split("::")
        for end in range(len(parts), 0, -1):
            alias = self.aliases.get("::".join(parts[:end]))
            if alias:
                return "::".join([alias] + parts[end:])
        return path

    # ---- types ---------------------------------------------------------

    def path_of(self, path):
        """A resolved path: the item's canonical path when rustdoc knows it."""
        return self.name(path["id"], path["path"]) + self.generic_args(path.get("args"))

    def generic_args(self, args):
        if not args:
            return ""
        if "angle_bracketed" in args:
            inner = args["angle_bracketed"]
            parts = [self.generic_arg(arg) for arg in inner["args"]]
            parts += [self.constraint(c) for c in inner["constraints"]]
            return "<" + ", ".join(parts) + ">" if parts else ""
        if "parenthesized" in args:
            inner = args["parenthesized"]
            out = "(" + ", ".join(self.ty(t) for t in inner["inputs"]) + ")"
            if inner.get("output") is not None:
                out += " -> " + self.ty(inner["output"])
            return out
        return "(..)"

    def generic_arg(self, arg):
        if arg == "infer":
            return "_"
        if "type" in arg:
            return self.ty(arg["type"])
        if "lifetime" in arg:
            return arg["lifetime"]
        if "const" in arg:
            return arg["const"].get("expr", "_")
        return "?"

    def constraint(self, c):
        name = c["name"] + self.generic_args(c.get("args"))
        binding = c["binding"]
        if "equality" in binding:
            term = binding["equality"]
            value = self.ty(term["type"]) if "type" in term else term.get("constant", {}).get("expr", "_")
            return f"{name} = {value}"
        return f"{name}: {self.bounds(binding['constraint'])}"

    def bounds(self, bounds):
        return " + ".join(self.bound(b) for b in bounds)

    def bound(self, b):
        if "trait_bound" in b:
            tb = b["trait_bound"]
            prefix = {"maybe": "?", "maybe_const": "~const "}.get(tb.get("modifier"), "")
            hrtb = self.hrtb(tb.get("generic_params", []))
            return hrtb + prefix + self.path_of(tb["trait"])
        if "outlives" in b:
            return b["outlives"]
        if "use" in b:
            return "use<" + ", ".join(str(u.get("lifetime", u.get("param", u))) if isinstance(u, dict) else str(u) for u in b["use"]) + ">"
        return "?"

    def hrtb(self, params):
        return f"for<{', '.join(p['name'] for p in params)}> " if params else ""

    def ty(self, t):
        if t is None:
            return "()"
        kind, v = next(iter(t.items())) if isinstance(t, dict) else (t, None)
        if kind == "resolved_path":
            return self.path_of(v)
        if kind == "generic":
            return v
        if kind == "primitive":
            return v
        if kind == "borrowed_ref":
            lifetime = v["lifetime"] + " " if v["lifetime"] else ""
            return "&" + lifetime + ("mut " if v["is_mutable"] else "") + self.ty(v["type"])
        if kind == "raw_pointer":
            return ("*mut " if v["is_mutable"] else "*const ") + self.ty(v["type"])
        if kind == "tuple":
            inner = ", ".join(self.ty(x) for x in v)
            return f"({inner},)" if len(v) == 1 else f"({inner})"
        if kind == "slice":
            return f"[{self.ty(v)}]"
        if kind == "array":
            return f"[{self.ty(v['type'])}; {v['len']}]"
        if kind == "impl_trait":
            return "impl " + self.bounds(v)
        if kind == "dyn_trait":
            parts = [self.hrtb(p.get("generic_params", [])) + self.path_of(p["trait"]) for p in v["traits"]]
            if v.get("lifetime"):
                parts.append(v["lifetime"])
            return "dyn " + " + ".join(parts)
        if kind == "qualified_path":
            trait = v.get("trait")
            self_ty = self.ty(v["self_type"])
            name = v["name"] + self.generic_args(v.get("args"))
            if trait and trait.get("path"):
                return f"<{self_ty} as {self.path_of(trait)}>::{name}"
            return f"{self_ty}::{name}"
        if kind == "function_pointer":
            sig = v["sig"]
            inputs = ", ".join(self.ty(x[1]) for x in sig["inputs"])
            out = f" -> {self.ty(sig['output'])}" if sig.get("output") is not None else ""
            return f"fn({inputs}){out}"
        if kind == "infer":
            return "_"
        return kind

    def generics(self, g):
        params = []
        for p in g["params"]:
            kind = p["kind"]
            if "lifetime" in kind:
                outlives = kind["lifetime"]["outlives"]
                params.append(p["name"] + (": " + " + ".join(outlives) if outlives else ""))
            elif "type" in kind:
                if kind["type"].get("is_synthetic"):
                    continue
                b = kind["type"]["bounds"]
                params.append(p["name"] + (": " + self.bounds(b) if b else ""))
            elif "const" in kind:
                params.append(f"const {p['name']}: {self.ty(kind['const']['type'])}")
        return "<" + ", ".join(params) + ">" if params else ""

    def where_clause(self, g):
        preds = []
        for w in g["where_predicates"]:
            if "bound_predicate" in w:
                bp = w["bound_predicate"]
                preds.append(self.hrtb(bp.get("generic_params", [])) + self.ty(bp["type"]) + ": " + self.bounds(bp["bounds"]))
            elif "lifetime_predicate" in w:
                lp = w["lifetime_predicate"]
                preds.append(lp["lifetime"] + ": " + " + ".join(lp["outlives"]))
            elif "eq_predicate" in w:
                ep = w["eq_predicate"]
                rhs = ep["rhs"]
                preds.append(self.ty(ep["lhs"]) + " = " + (self.ty(rhs["type"]) if "type" in rhs else "_"))
        return " where " + ", ".join(preds) if preds else ""

    def function(self, f):
        header = f["header"]
        quals = "".join(q for q, on in [("const ", header["is_const"]), ("async ", header["is_async"]), ("unsafe ", header["is_unsafe"])] if on)
        inputs = []
        for name, t in f["sig"]["inputs"]:
            if name == "self":
                inputs.append(self.self_param(t))
            else:
                inputs.append(f"{name}: {self.ty(t)}")
        out = f["sig"]["output"]
        ret = f" -> {self.ty(out)}" if out is not None else ""
        return quals, "(" + ", ".join(inputs) + ")" + ret + self.where_clause(f["generics"])

    def self_param(self, t):
        if t == {"generic": "Self"}:
            return "self"
        if "borrowed_ref" in t and t["borrowed_ref"]["type"] == {"generic": "Self"}:
            b = t["borrowed_ref"]
            lifetime = b["lifetime"] + " " if b["lifetime"] else ""
            return "&" + lifetime + ("mut " if b["is_mutable"] else "") + "self"
        return "self: " + self.ty(t)

    # ---- items ---------------------------------------------------------

    def emit(self, line):
        if self.emitting:
            self.lines.add(line)

    @staticmethod
    def attrs(item):
        out = []
        for a in item.get("attrs", []):
            text = a if isinstance(a, str) else next(iter(a)) if isinstance(a, dict) else str(a)
            if "non_exhaustive" in text:
                out.append("#[non_exhaustive] ")
        return "".join(out)

    def walk(self, item_id, path):
        item = self.index.get(str(item_id))
        if item is None:
            return
        key = (item_id, path)
        if key in self.seen:
            return
        self.seen.add(key)
        known = self.paths.get(str(item_id))
        if known and not self.emitting:
            defined = "::".join(known["path"])
            best = self.public.get(defined)
            if best is None or (best.count("::"), best) > (path.count("::"), path):
                self.public[defined] = path
        kind, v = next(iter(item["inner"].items()))
        handler = getattr(self, "item_" + kind, None)
        if handler:
            handler(item, v, path)

    def item_module(self, item, v, path):
        self.emit(f"pub mod {path}")
        for child in v["items"]:
            self.child(child, path)

    def child(self, child_id, path):
        child = self.index.get(str(child_id))
        if child is None:
            return
        kind, v = next(iter(child["inner"].items()))
        if kind == "use":
            self.reexport(v, path)
        elif kind != "impl" and child.get("name"):
            self.walk(child_id, f"{path}::{child['name']}")

    def reexport(self, use, path):
        target = use.get("id")
        local = target is not None and str(target) in self.index
        if use["is_glob"]:
            if local:
                inner = self.index[str(target)]["inner"]
                items = inner.get("module", {}).get("items", [])
                for child in items:
                    self.child(child, path)
            else:
                self.emit(f"pub use {path}::* = {use['source']}::*")
            return
        new_path = f"{path}::{use['name']}"
        if local:
            self.walk(target, new_path)
        else:
            source = self.name(target, use["source"], alias=False) if target is not None else use["source"]
            best = self.aliases.get(source)
            if not self.emitting and (best is None or (best.count("::"), best) > (new_path.count("::"), new_path)):
                self.aliases[source] = new_path
            self.emit(f"pub use {new_path} = {source}")

    def item_struct(self, item, v, path):
        g = self.generics(v["generics"])
        k = v["kind"]
        self.emit(f"{self.attrs(item)}pub struct {path}{g}{self.where_clause(v['generics'])}")
        self.fields(k, "plain", path)
        self.impls(v["impls"], path)

    def fields(self, kind, named, path):
        """The public fields of a struct or variant: `named` ones (the key
        rustdoc uses for braces), or a tuple's, by position."""
        if not isinstance(kind, dict):
            return
        if named in kind:
            for f in kind[named]["fields"]:
                self.field(f, path)
        for i, f in enumerate(kind.get("tuple", [])):
            if f is not None:
                self.field(f, path, str(i))

    def field(self, field_id, path, name=None):
        f = self.index.get(str(field_id))
        if f is None:
            return
        self.emit(f"pub {path}::{name or f['name']}: {self.ty(f['inner']['struct_field'])}")

    def item_enum(self, item, v, path):
        g = self.generics(v["generics"])
        self.emit(f"{self.attrs(item)}pub enum {path}{g}{self.where_clause(v['generics'])}")
        for var_id in v["variants"]:
            var = self.index[str(var_id)]
            vpath = f"{path}::{var['name']}"
            k = var["inner"]["variant"]["kind"]
            self.emit(f"{self.attrs(var)}pub variant {vpath}")
            self.fields(k, "struct", vpath)
        self.impls(v["impls"], path)

    def item_union(self, item, v, path):
        self.emit(f"pub union {path}{self.generics(v['generics'])}")
        self.impls(v["impls"], path)

    def impls(self, impl_ids, path):
        for impl_id in impl_ids:
            imp = self.index.get(str(impl_id))
            if imp is None:
                continue
            i = imp["inner"]["impl"]
            if i.get("blanket_impl") is not None:
                continue
            if i["trait"] is None:
                for member in i["items"]:
                    self.member(member, path)
                continue
            trait_name = i["trait"]["path"].split("::")[-1]
            if trait_name in HIDDEN_TRAITS or (i.get("is_synthetic") and trait_name not in AUTO_TRAITS):
                continue
            neg = "!" if i.get("is_negative") else ""
            unsafe = "unsafe " if i.get("is_unsafe") else ""
            g = self.generics(i["generics"])
            self.emit(f"{unsafe}impl{g} {neg}{self.path_of(i['trait'])} for {self.ty(i['for'])}{self.where_clause(i['generics'])}")

    def member(self, member_id, path, in_trait=False):
        m = self.index.get(str(member_id))
        if m is None or (not in_trait and m.get("visibility") != "public"):
            return
        kind, v = next(iter(m["inner"].items()))
        mpath = f"{path}::{m['name']}"
        if kind == "function":
            quals, sig = self.function(v)
            provided = " (provided)" if in_trait and v.get("has_body") else ""
            self.emit(f"pub {quals}fn {mpath}{self.generics(v['generics'])}{sig}{provided}")
        elif kind == "assoc_const":
            value = f" = {v['value']}" if v.get("value") is not None and in_trait else ""
            self.emit(f"pub const {mpath}: {self.ty(v['type'])}{value}")
        elif kind == "assoc_type":
            b = self.bounds(v.get("bounds", []))
            default = f" = {self.ty(v['type'])}" if v.get("type") is not None else ""
            self.emit(f"pub type {mpath}{': ' + b if b else ''}{default}")

    def item_trait(self, item, v, path):
        quals = ("unsafe " if v["is_unsafe"] else "") + ("auto " if v["is_auto"] else "")
        b = self.bounds(v["bounds"])
        dyn = "" if v.get("is_dyn_compatible", True) else " (not dyn-compatible)"
        self.emit(f"pub {quals}trait {path}{self.generics(v['generics'])}{': ' + b if b else ''}{self.where_clause(v['generics'])}{dyn}")
        for member in v["items"]:
            self.member(member, path, in_trait=True)

    def item_function(self, item, v, path):
        quals, sig = self.function(v)
        self.emit(f"pub {quals}fn {path}{self.generics(v['generics'])}{sig}")

    def item_constant(self, item, v, path):
        self.emit(f"pub const {path}: {self.ty(v['type'])}")

    def item_static(self, item, v, path):
        mutable = "mut " if v.get("is_mutable") else ""
        self.emit(f"pub static {mutable}{path}: {self.ty(v['type'])}")

    def item_type_alias(self, item, v, path):
        self.emit(f"pub type {path}{self.generics(v['generics'])} = {self.ty(v['type'])}")

    def item_macro(self, item, v, path):
        self.emit(f"macro_rules! {item['name']}")

    def item_proc_macro(self, item, v, path):
        helpers = f" (helpers: {', '.join(v['helpers'])})" if v.get("helpers") else ""
        self.emit(f"proc_macro {v['kind']} {path}{helpers}")


def main():
    public = {}
    apis = [Api(json.load(open(path)), public) for path in sys.argv[1:]]
    # The re-exported crates first: the first one's aliases need their paths.
    for api in apis[1:] + apis[:1]:
        api.public_paths()
    for line in apis[0].render():
        print(line)


if __name__ == "__main__":
    main()
