"""Render an AST back to CEL source text (clause texts in explanations, fuzzer reports)."""

from __future__ import annotations

from .parser import (
    Bind,
    Call,
    Comprehension,
    CreateList,
    CreateMap,
    CreateStruct,
    Ident,
    Index,
    Literal,
    Node,
    OptMap,
    Select,
)

__all__ = ["unparse"]

_BINARY = {
    "_||_": ("||", 1), "_&&_": ("&&", 2),
    "_==_": ("==", 3), "_!=_": ("!=", 3), "_<_": ("<", 3), "_<=_": ("<=", 3),
    "_>_": (">", 3), "_>=_": (">=", 3), "@in": ("in", 3),
    "_+_": ("+", 4), "_-_": ("-", 4), "_*_": ("*", 5), "_/_": ("/", 5), "_%_": ("%", 5),
}  # fmt: skip


def _literal(node: Literal) -> str:
    v = node.value
    if node.kind == "null":
        return "null"
    if node.kind == "bool":
        return "true" if v else "false"
    if node.kind == "uint":
        return f"{v}u"
    if node.kind == "double":
        r = repr(v)
        return r if ("." in r or "e" in r or "n" in r) else r + ".0"
    if node.kind == "string":
        return '"' + v.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'
    if node.kind == "bytes":
        return 'b"' + "".join(f"\\x{b:02x}" for b in v) + '"'
    return str(v)


def _prec(node: Node) -> int:
    if isinstance(node, Call) and node.target is None:
        if node.function == "_?_:_":
            return 0
        if node.function in _BINARY:
            return _BINARY[node.function][1]
        if node.function in ("!_", "-_"):
            return 6
    return 7


def unparse(node: Node) -> str:
    """CEL source for ``node`` (parenthesised as needed; not byte-identical to the input)."""
    if isinstance(node, Literal):
        return _literal(node)
    if isinstance(node, Ident):
        return node.name
    if isinstance(node, Select):
        inner = _wrap(node.operand, 7)
        dot = ".?" if node.optional else "."
        text = f"{inner}{dot}{node.field}"
        return f"has({text})" if node.test_only else text
    if isinstance(node, Index):
        return f"{_wrap(node.operand, 7)}[{'?' if node.optional else ''}{unparse(node.index)}]"
    if isinstance(node, Call):
        fn = node.function
        if node.target is None and fn in _BINARY:
            op, p = _BINARY[fn]
            left = _wrap(node.args[0], p)
            right = _wrap(node.args[1], p + 1)
            return f"{left} {op} {right}"
        if node.target is None and fn == "_?_:_":
            c, a, b = node.args
            return f"{_wrap(c, 1)} ? {_wrap(a, 1)} : {_wrap(b, 0)}"
        if node.target is None and fn == "!_":
            return f"!{_wrap(node.args[0], 7)}"
        if node.target is None and fn == "-_":
            return f"-{_wrap(node.args[0], 7)}"
        args = ", ".join(unparse(a) for a in node.args)
        if node.target is not None:
            return f"{_wrap(node.target, 7)}.{fn}({args})"
        return f"{fn}({args})"
    if isinstance(node, CreateList):
        return (
            "["
            + ", ".join(
                ("?" if i in node.optional_indices else "") + unparse(e)
                for i, e in enumerate(node.elements)
            )
            + "]"
        )
    if isinstance(node, CreateMap):
        return (
            "{"
            + ", ".join(
                f"{'?' if e.optional else ''}{unparse(e.key)}: {unparse(e.value)}"
                for e in node.entries
            )
            + "}"
        )
    if isinstance(node, Comprehension):
        names = [node.var] + ([node.var2] if node.var2 else [])
        args = ", ".join(names + [unparse(a) for a in node.args])
        return f"{_wrap(node.range, 7)}.{node.kind}({args})"
    if isinstance(node, Bind):
        return f"cel.bind({node.var}, {unparse(node.init)}, {unparse(node.body)})"
    if isinstance(node, OptMap):
        fn = "optFlatMap" if node.flat else "optMap"
        return f"{_wrap(node.target, 7)}.{fn}({node.var}, {unparse(node.body)})"
    if isinstance(node, CreateStruct):
        fields = ", ".join(f"{n}: {unparse(v)}" for n, v, _ in node.fields)
        return f"{node.type_name}{{{fields}}}"
    raise AssertionError(f"unknown node {node!r}")


def _wrap(node: Node, min_prec: int) -> str:
    text = unparse(node)
    if _prec(node) < min_prec:
        return f"({text})"
    return text
