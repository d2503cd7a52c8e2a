"""CEL lexer and recursive-descent parser producing a small AST with source positions.

The grammar is the CEL language definition's (cel-spec ``langdef.md``), with the optional
syntax (``.?f``, ``[?k]``, ``[?e]``, ``{?k: v}``), backtick-quoted field names, and the
macros expanded at parse time as cel-go does: ``has``, ``all``, ``exists``,
``exists_one``/``existsOne``, ``map``, ``filter``, the two-variable forms and
``transformList``/``transformMap``/``transformMapEntry``, ``cel.bind``, ``optMap`` and
``optFlatMap``.

Positions are 0-based character offsets of the token cel-go attaches the node's id to:
the operator for unary/binary operators, ``.`` for a selection, ``[`` for an index, ``(``
for a receiver call, the name for a global call.

Two details follow the ANTLR grammar exactly because the fuzzer found them in an earlier
prototype (cel-engines.md §3): a leading ``-`` directly before a number is part of the
literal (``-9223372036854775808`` is valid), and an even run of ``!`` or ``-`` is dropped.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from .errors import CelCompileError

__all__ = [
    "Node",
    "Literal",
    "Ident",
    "Select",
    "Index",
    "Call",
    "CreateList",
    "CreateMap",
    "CreateStruct",
    "Comprehension",
    "Bind",
    "parse",
    "MAX_CODE_POINTS",
    "MAX_RECURSION_DEPTH",
    "RECURSION_HEADROOM",
    "recursion_headroom",
]

# cel-go's parser defaults (google/cel-go parser/parser.go, NewParser; Kubernetes' CEL
# environments keep them): at most 100,000 code points, and a recursion depth of 250, checked
# twice. While parsing, no grammar rule may be nested more than 250 deep (nested parentheses,
# lists, call arguments, ternaries): "expression recursion limit exceeded: 250". While building
# the AST, no path may cross more than 250 of the nodes whose visit recurses (a relation, an
# arithmetic operator, a field selection, an index, a receiver call or macro, a ternary):
# "max recursion depth exceeded". Both are reported without a position (cel-go's NoLocation).
# Within these limits every later pass (checker, codegen, unparse) recurses at most a few
# thousand frames deep; see ``RECURSION_HEADROOM``.
MAX_CODE_POINTS = 100_000
MAX_RECURSION_DEPTH = 250
# Python frames the passes may need for an expression within those limits: the parser uses
# about ten per ``expr`` nesting, the checker and code generator a few per AST level, and
# the AST is at most about 1,500 levels deep (250 nestings of a few levels each, plus 250
# visitor-counted nodes). Python 3.11 keeps pure-Python calls off the C stack, so a higher
# limit only lets the interpreter use the frames these bounded passes need.
RECURSION_HEADROOM = 30_000


@contextlib.contextmanager
def recursion_headroom() -> Iterator[None]:
    """Raise Python's recursion limit to ``RECURSION_HEADROOM`` for one compile (then restore it)."""
    old = sys.getrecursionlimit()
    if old >= RECURSION_HEADROOM:
        yield
        return
    sys.setrecursionlimit(RECURSION_HEADROOM)
    try:
        yield
    finally:
        sys.setrecursionlimit(old)


_RESERVED = frozenset(
    "as break const continue else for function if import let loop package namespace "
    "return var void while".split()
)


_DIGITS = frozenset("0123456789")
"""The digits a CEL number starts with (ASCII only)."""


# --------------------------------------------------------------------------------------
# AST
# --------------------------------------------------------------------------------------
@dataclass(eq=False)
class Node:
    pos: int


@dataclass(eq=False)
class Literal(Node):
    value: Any
    kind: str  # int | uint | double | string | bytes | bool | null


@dataclass(eq=False)
class Ident(Node):
    name: str


@dataclass(eq=False)
class Select(Node):
    operand: Node
    field: str
    test_only: bool = False  # has(operand.field)
    optional: bool = False  # operand.?field


@dataclass(eq=False)
class Index(Node):
    operand: Node
    index: Node
    optional: bool = False  # operand[?index]


@dataclass(eq=False)
class Call(Node):
    function: str
    target: Node | None
    args: list[Node]


@dataclass(eq=False)
class CreateList(Node):
    elements: list[Node]
    optional_indices: frozenset[int] = frozenset()


@dataclass(eq=False)
class MapEntry:
    pos: int
    key: Node
    value: Node
    optional: bool = False


@dataclass(eq=False)
class CreateMap(Node):
    entries: list[MapEntry]


@dataclass(eq=False)
class CreateStruct(Node):
    type_name: str
    fields: list[tuple[str, Node, bool]]


@dataclass(eq=False)
class Comprehension(Node):
    """A macro over a list or map.

    ``kind`` is one of all, exists, exists_one, map, filter, transformList, transformMap,
    transformMapEntry; ``var2`` is set for the two-variable forms; ``args`` holds the
    predicate/transform (and for map/transform* with a filter: filter first, then transform).
    """

    kind: str
    range: Node
    var: str
    var2: str | None
    args: list[Node] = field(default_factory=list)


@dataclass(eq=False)
class Bind(Node):
    """``cel.bind(var, init, body)``."""

    var: str
    init: Node
    body: Node


@dataclass(eq=False)
class OptMap(Node):
    """``opt.optMap(var, expr)`` / ``opt.optFlatMap(var, expr)``."""

    target: Node
    var: str
    body: Node
    flat: bool


# --------------------------------------------------------------------------------------
# Lexer
# --------------------------------------------------------------------------------------
@dataclass(slots=True)
class Token:
    kind: str  # op, ident, int, uint, double, string, bytes, eof
    text: str
    pos: int
    value: Any = None


_OPERATORS = [
    "&&", "||", "==", "!=", "<=", ">=", ".?", "<", ">", "!", "+", "-", "*", "/", "%",
    "?", ":", ".", ",", "(", ")", "[", "]", "{", "}",
]  # fmt: skip

_SIMPLE_ESCAPES = {
    "a": "\a", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t", "v": "\v",
    "\\": "\\", "'": "'", '"': '"', "`": "`", "?": "?",
}  # fmt: skip


class _Lexer:
    def __init__(self, text: str) -> None:
        self.text = text
        self.i = 0

    def error(self, pos: int, msg: str) -> CelCompileError:
        return CelCompileError(self.text, pos, msg)

    def tokens(self) -> list[Token]:
        out: list[Token] = []
        text = self.text
        n = len(text)
        while True:
            # whitespace and comments
            while self.i < n:
                ch = text[self.i]
                if ch in " \t\n\r\f":
                    self.i += 1
                elif text.startswith("//", self.i):
                    nl = text.find("\n", self.i)
                    self.i = n if nl < 0 else nl + 1
                else:
                    break
            if self.i >= n:
                out.append(Token("eof", "", n))
                return out
            start = self.i
            ch = text[start]
            # ASCII only: CEL's identifiers and digits are ASCII, and str.isalpha() /
            # isdigit() are true for '日' or '٣', which an ASCII-only scan below would
            # not advance past (an endless loop: the lexer once hung on '日本語').
            if ch in _DIGITS or (ch == "." and start + 1 < n and text[start + 1] in _DIGITS):
                out.append(self._number())
                continue
            if (ch.isascii() and ch.isalpha()) or ch == "_":
                j = start
                while j < n and (text[j].isalnum() or text[j] == "_") and text[j].isascii():
                    j += 1
                word = text[start:j]
                # string prefixes: r, b, rb, br (any case)
                lower = word.lower()
                if j < n and text[j] in "'\"" and lower in ("r", "b", "rb", "br"):
                    self.i = j
                    out.append(self._string(start, raw="r" in lower, is_bytes="b" in lower))
                    continue
                self.i = j
                out.append(Token("ident", word, start))
                continue
            if ch in "'\"":
                out.append(self._string(start, raw=False, is_bytes=False))
                continue
            if ch == "`":
                end = text.find("`", start + 1)
                if end < 0:
                    raise self.error(start, "Syntax error: token recognition error at: '`'")
                name = text[start + 1 : end]
                if not name or not all(c.isalnum() or c in "_.-/ " for c in name):
                    raise self.error(start, f"Syntax error: invalid quoted field name '{name}'")
                self.i = end + 1
                out.append(Token("qident", name, start))
                continue
            for op in _OPERATORS:
                if text.startswith(op, start):
                    self.i = start + len(op)
                    out.append(Token("op", op, start))
                    break
            else:
                raise self.error(start, f"Syntax error: token recognition error at: '{ch}'")

    def _number(self) -> Token:
        text, start = self.text, self.i
        n = len(text)
        j = start
        if text.startswith(("0x", "0X"), start):
            j = start + 2
            while j < n and text[j] in "0123456789abcdefABCDEF":
                j += 1
            if j == start + 2:
                raise self.error(start, "Syntax error: invalid hex literal")
            digits = text[start:j]
            if j < n and text[j] in "uU":
                self.i = j + 1
                return Token("uint", text[start : j + 1], start, int(digits, 16))
            self.i = j
            return Token("int", digits, start, int(digits, 16))
        while j < n and text[j].isdigit():
            j += 1
        is_float = False
        if j < n and text[j] == "." and j + 1 < n and text[j + 1].isdigit():
            is_float = True
            j += 1
            while j < n and text[j].isdigit():
                j += 1
        if j < n and text[j] in "eE":
            k = j + 1
            if k < n and text[k] in "+-":
                k += 1
            if k < n and text[k].isdigit():
                is_float = True
                j = k
                while j < n and text[j].isdigit():
                    j += 1
        literal = text[start:j]
        if is_float:
            self.i = j
            return Token("double", literal, start, float(literal))
        if j < n and text[j] in "uU":
            self.i = j + 1
            return Token("uint", text[start : j + 1], start, int(literal))
        self.i = j
        return Token("int", literal, start, int(literal))

    def _string(self, start: int, raw: bool, is_bytes: bool) -> Token:
        text = self.text
        n = len(text)
        q = text[self.i]
        triple = text.startswith(q * 3, self.i)
        delim = q * 3 if triple else q
        j = self.i + len(delim)
        chunks: list[str] = []
        byte_chunks: list[bytes] = []

        def emit_text(s: str) -> None:
            if is_bytes:
                byte_chunks.append(s.encode("utf-8"))
            else:
                chunks.append(s)

        while True:
            if j >= n:
                raise self.error(
                    start, "Syntax error: token recognition error at: unterminated string"
                )
            if text.startswith(delim, j):
                j += len(delim)
                break
            ch = text[j]
            if not triple and ch in "\r\n":
                raise self.error(
                    start, "Syntax error: token recognition error at: unterminated string"
                )
            if ch == "\\" and not raw:
                if j + 1 >= n:
                    raise self.error(j, "Syntax error: invalid escape sequence")
                esc = text[j + 1]
                if esc in _SIMPLE_ESCAPES:
                    emit_text(_SIMPLE_ESCAPES[esc])
                    j += 2
                elif esc in "xX":
                    hexd = text[j + 2 : j + 4]
                    if len(hexd) != 2 or not all(c in "0123456789abcdefABCDEF" for c in hexd):
                        raise self.error(j, "Syntax error: invalid \\x escape")
                    val = int(hexd, 16)
                    if is_bytes:
                        byte_chunks.append(bytes([val]))
                    else:
                        chunks.append(chr(val))
                    j += 4
                elif esc in "uU":
                    width = 4 if esc == "u" else 8
                    hexd = text[j + 2 : j + 2 + width]
                    if len(hexd) != width or not all(c in "0123456789abcdefABCDEF" for c in hexd):
                        raise self.error(j, f"Syntax error: invalid \\{esc} escape")
                    val = int(hexd, 16)
                    if val > 0x10FFFF or 0xD800 <= val <= 0xDFFF:
                        raise self.error(j, "Syntax error: invalid unicode code point")
                    emit_text(chr(val))
                    j += 2 + width
                elif esc in "0123":
                    octd = text[j + 1 : j + 4]
                    if len(octd) != 3 or not all(c in "01234567" for c in octd):
                        raise self.error(j, "Syntax error: invalid octal escape")
                    val = int(octd, 8)
                    if is_bytes:
                        byte_chunks.append(bytes([val]))
                    else:
                        chunks.append(chr(val))
                    j += 4
                else:
                    raise self.error(j, f"Syntax error: invalid escape sequence '\\{esc}'")
                continue
            emit_text(ch)
            j += 1
        self.i = j
        if is_bytes:
            return Token("bytes", text[start:j], start, b"".join(byte_chunks))
        return Token("string", text[start:j], start, "".join(chunks))


# --------------------------------------------------------------------------------------
# Parser
# --------------------------------------------------------------------------------------
_RELOPS = {"<": "_<_", "<=": "_<=_", ">": "_>_", ">=": "_>=_", "==": "_==_", "!=": "_!=_"}
_ADDOPS = {"+": "_+_", "-": "_-_"}
_MULOPS = {"*": "_*_", "/": "_/_", "%": "_%_"}
# The global calls cel-go's visitor counts: relations, arithmetic and the ternary.
_VISITOR_COUNTED = frozenset(
    [*_RELOPS.values(), "@in", *_ADDOPS.values(), *_MULOPS.values(), "_?_:_"]
)

# receiver macros: name -> accepted argument counts
_RECEIVER_MACROS = {
    "all": (2, 3),
    "exists": (2, 3),
    "exists_one": (2, 3),
    "existsOne": (2, 3),
    "map": (2, 3),
    "filter": (2,),
    "transformList": (3, 4),
    "transformMap": (3, 4),
    "transformMapEntry": (3, 4),
    "optMap": (2,),
    "optFlatMap": (2,),
}


class _Parser:
    def __init__(self, text: str, macros: bool) -> None:
        self.text = text
        self.toks = _Lexer(text).tokens()
        self.k = 0
        self.macros = macros
        # Nesting of cel-go's grammar rules (its recursionListener counts per rule): every
        # rule is entered once per ``expr`` nesting; ``relation`` and ``calc`` once more for
        # a right operand (ANTLR parses it with a nested call to the same rule).
        self.depth = 0
        self.relation_depth = 0
        self.calc_depth = 0

    # token helpers
    @property
    def tok(self) -> Token:
        return self.toks[self.k]

    def peek(self, ahead: int = 1) -> Token:
        return self.toks[min(self.k + ahead, len(self.toks) - 1)]

    def at(self, text: str) -> bool:
        t = self.toks[self.k]
        return t.kind == "op" and t.text == text

    def advance(self) -> Token:
        t = self.toks[self.k]
        self.k += 1
        return t

    def error(self, pos: int, msg: str) -> CelCompileError:
        return CelCompileError(self.text, pos, msg)

    def unexpected(self) -> CelCompileError:
        t = self.tok
        if t.kind == "eof":
            return self.error(t.pos, "Syntax error: mismatched input '<EOF>'")
        return self.error(t.pos, f"Syntax error: mismatched input '{t.text}'")

    def expect(self, text: str) -> Token:
        if not self.at(text):
            t = self.tok
            shown = "<EOF>" if t.kind == "eof" else t.text
            raise self.error(t.pos, f"Syntax error: mismatched input '{shown}' expecting '{text}'")
        return self.advance()

    # grammar
    def parse(self) -> Node:
        node = self.expr()
        if self.tok.kind != "eof":
            t = self.tok
            raise self.error(t.pos, f"Syntax error: extraneous input '{t.text}' expecting <EOF>")
        return node

    def _too_deep(self) -> CelCompileError:
        return CelCompileError(
            self.text, None, f"expression recursion limit exceeded: {MAX_RECURSION_DEPTH}"
        )

    def expr(self) -> Node:
        self.depth += 1
        self.relation_depth += 1
        self.calc_depth += 1
        if self.depth > MAX_RECURSION_DEPTH:
            raise self._too_deep()
        cond = self.or_expr()
        if self.at("?"):
            q = self.advance()
            then = self.or_expr()
            self.expect(":")
            other = self.expr()
            cond = Call(q.pos, "_?_:_", None, [cond, then, other])
        self.depth -= 1
        self.relation_depth -= 1
        self.calc_depth -= 1
        return cond

    def or_expr(self) -> Node:
        return self._logic("||", "_||_", self.and_expr)

    def and_expr(self) -> Node:
        return self._logic("&&", "_&&_", self.relation)

    def _logic(self, op: str, function: str, term: Callable[[], Node]) -> Node:
        terms = [term()]
        ops: list[int] = []
        while self.at(op):
            ops.append(self.advance().pos)
            terms.append(term())
        if not ops:
            return terms[0]
        return _balanced(function, terms, ops, 0, len(ops) - 1)

    def _right_operand(self, parse_operand: Callable[[], Node], rule: str) -> Node:
        """A right operand, one level deeper in ``rule`` (cel-go's rule-nesting count)."""
        depth = getattr(self, rule) + 1
        if depth > MAX_RECURSION_DEPTH:
            raise self._too_deep()
        setattr(self, rule, depth)
        node = parse_operand()
        setattr(self, rule, depth - 1)
        return node

    def relation(self) -> Node:
        left = self.addition()
        while True:
            t = self.tok
            if t.kind == "op" and t.text in _RELOPS:
                self.advance()
                right = self._right_operand(self.addition, "relation_depth")
                left = Call(t.pos, _RELOPS[t.text], None, [left, right])
            elif t.kind == "ident" and t.text == "in":
                self.advance()
                right = self._right_operand(self.addition, "relation_depth")
                left = Call(t.pos, "@in", None, [left, right])
            else:
                return left

    def addition(self) -> Node:
        left = self.multiplication()
        while self.tok.kind == "op" and self.tok.text in _ADDOPS:
            op = self.advance()
            right = self._right_operand(self.multiplication, "calc_depth")
            left = Call(op.pos, _ADDOPS[op.text], None, [left, right])
        return left

    def multiplication(self) -> Node:
        left = self.unary()
        while self.tok.kind == "op" and self.tok.text in _MULOPS:
            op = self.advance()
            right = self._right_operand(self.unary, "calc_depth")
            left = Call(op.pos, _MULOPS[op.text], None, [left, right])
        return left

    def unary(self) -> Node:
        t = self.tok
        if self.at("!"):
            ops: list[Token] = []
            while self.at("!"):
                ops.append(self.advance())
            operand = self.member()
            if len(ops) % 2 == 0:
                return operand
            return Call(ops[0].pos, "!_", None, [operand])
        if self.at("-"):
            ops = []
            while self.at("-"):
                ops.append(self.advance())
            nxt = self.tok
            if len(ops) == 1 and nxt.kind in ("int", "double"):
                # `-1` is a signed literal (ANTLR prefers the `member` alternative).
                self.advance()
                if nxt.kind == "int":
                    value = -nxt.value
                    if value < -(2**63):
                        raise self.error(nxt.pos, "integer literal out of range")
                    lit: Node = Literal(t.pos, value, "int")
                else:
                    lit = Literal(t.pos, -nxt.value, "double")
                return self.member_suffix(lit)
            operand = self.member()
            if len(ops) % 2 == 0:
                return operand
            return Call(ops[0].pos, "-_", None, [operand])
        return self.member()

    def member(self) -> Node:
        return self.member_suffix(self.primary())

    def member_suffix(self, node: Node) -> Node:
        while True:
            if self.at(".") or self.at(".?"):
                dot = self.advance()
                optional = dot.text == ".?"
                name_tok = self.tok
                if name_tok.kind not in ("ident", "qident"):
                    raise self.unexpected()
                self.advance()
                name = name_tok.text
                if self.at("(") and not optional and name_tok.kind == "ident":
                    open_tok = self.advance()
                    args = self.expr_list(")")
                    self.expect(")")
                    node = self.receiver_call(open_tok.pos, node, name, args)
                else:
                    node = Select(dot.pos, node, name, optional=optional)
            elif self.at("["):
                open_tok = self.advance()
                optional = False
                if self.at("?"):
                    self.advance()
                    optional = True
                index = self.expr()
                self.expect("]")
                node = Index(open_tok.pos, node, index, optional)
            elif self.at("{") and self._qualified_name(node) is not None:
                type_name = self._qualified_name(node)
                assert type_name is not None
                open_tok = self.advance()
                node = CreateStruct(open_tok.pos, type_name, self.field_inits())
                self.expect("}")
            else:
                return node

    def _qualified_name(self, node: Node) -> str | None:
        if isinstance(node, Ident):
            return node.name
        if isinstance(node, Select) and not node.optional and not node.test_only:
            prefix = self._qualified_name(node.operand)
            return None if prefix is None else f"{prefix}.{node.field}"
        return None

    def field_inits(self) -> list[tuple[str, Node, bool]]:
        fields: list[tuple[str, Node, bool]] = []
        while not self.at("}"):
            optional = False
            if self.at("?"):
                self.advance()
                optional = True
            name_tok = self.tok
            if name_tok.kind not in ("ident", "qident"):
                raise self.unexpected()
            self.advance()
            self.expect(":")
            fields.append((name_tok.text, self.expr(), optional))
            if not self.at(","):
                break
            self.advance()
        return fields

    def expr_list(self, close: str) -> list[Node]:
        args: list[Node] = []
        if self.at(close):
            return args
        while True:
            args.append(self.expr())
            if not self.at(","):
                return args
            self.advance()
            if self.at(close):
                return args

    def primary(self) -> Node:
        t = self.tok
        if t.kind == "ident":
            self.advance()
            name = t.text
            if name == "true":
                return Literal(t.pos, True, "bool")
            if name == "false":
                return Literal(t.pos, False, "bool")
            if name == "null":
                return Literal(t.pos, None, "null")
            if name in _RESERVED or name == "in":
                raise self.error(t.pos, f"reserved identifier: {name}")
            if self.at("("):
                self.advance()
                args = self.expr_list(")")
                self.expect(")")
                return self.global_call(t.pos, name, args)
            return Ident(t.pos, name)
        if t.kind == "op" and t.text == "." and self.peek().kind == "ident":
            # leading-dot global reference `.x` / `.f()`
            self.advance()
            ident = self.advance()
            if self.at("("):
                self.advance()
                args = self.expr_list(")")
                self.expect(")")
                return self.global_call(ident.pos, ident.text, args)
            return Ident(ident.pos, ident.text)
        if t.kind in ("int", "uint", "double", "string", "bytes"):
            self.advance()
            if t.kind == "int" and t.value >= 2**63:
                raise self.error(t.pos, "integer literal out of range")
            if t.kind == "uint" and t.value >= 2**64:
                raise self.error(t.pos, "unsigned integer literal out of range")
            return Literal(t.pos, t.value, t.kind)
        if self.at("("):
            self.advance()
            inner = self.expr()
            self.expect(")")
            return inner
        if self.at("["):
            self.advance()
            elements: list[Node] = []
            optional_indices: set[int] = set()
            while not self.at("]"):
                if self.at("?"):
                    self.advance()
                    optional_indices.add(len(elements))
                elements.append(self.expr())
                if not self.at(","):
                    break
                self.advance()
            self.expect("]")
            return CreateList(t.pos, elements, frozenset(optional_indices))
        if self.at("{"):
            self.advance()
            entries: list[MapEntry] = []
            while not self.at("}"):
                optional = False
                if self.at("?"):
                    self.advance()
                    optional = True
                key = self.expr()
                colon = self.expect(":")
                value = self.expr()
                entries.append(MapEntry(colon.pos, key, value, optional))
                if not self.at(","):
                    break
                self.advance()
            self.expect("}")
            return CreateMap(t.pos, entries)
        raise self.unexpected()

    # macros
    def global_call(self, pos: int, name: str, args: list[Node]) -> Node:
        if self.macros and name == "has" and len(args) == 1:
            arg = args[0]
            if not isinstance(arg, Select) or arg.optional or arg.test_only:
                raise self.error(pos, "invalid argument to has() macro")
            return Select(arg.pos, arg.operand, arg.field, test_only=True)
        return Call(pos, name, None, args)

    def _simple_name(self, node: Node, pos: int) -> str:
        if not isinstance(node, Ident):
            raise self.error(node.pos, "argument must be a simple name")
        return node.name

    def receiver_call(self, pos: int, target: Node, name: str, args: list[Node]) -> Node:
        if self.macros:
            if (
                name == "bind"
                and isinstance(target, Ident)
                and target.name == "cel"
                and len(args) == 3
            ):
                var = self._simple_name(args[0], pos)
                return Bind(pos, var, args[1], args[2])
            counts = _RECEIVER_MACROS.get(name)
            if counts is not None and len(args) in counts:
                if name in ("optMap", "optFlatMap"):
                    var = self._simple_name(args[0], pos)
                    return OptMap(pos, target, var, args[1], name == "optFlatMap")
                kind = "exists_one" if name == "existsOne" else name
                two_var = kind.startswith("transform") or len(args) == counts[-1] and kind != "map"
                if kind == "map":
                    # map(x, t) or map(x, filter, t): one variable
                    var = self._simple_name(args[0], pos)
                    return Comprehension(pos, "map", target, var, None, list(args[1:]))
                if kind == "filter":
                    var = self._simple_name(args[0], pos)
                    return Comprehension(pos, "filter", target, var, None, [args[1]])
                if two_var:
                    var = self._simple_name(args[0], pos)
                    var2 = self._simple_name(args[1], pos)
                    if var == var2:
                        raise self.error(args[1].pos, f"duplicate variable name: {var}")
                    return Comprehension(pos, kind, target, var, var2, list(args[2:]))
                var = self._simple_name(args[0], pos)
                return Comprehension(pos, kind, target, var, None, [args[1]])
        return Call(pos, name, target, args)


# ``&&``/``||`` chains are balanced as cel-go's parser does (parser/helper.go, logicManager),
# so 2,000 ``&&`` terms nest 11 deep, not 2,000.
def _balanced(function: str, terms: list[Node], ops: list[int], lo: int, hi: int) -> Node:
    """cel-go's balanced tree of ``terms`` joined by the operators at ``ops[lo..hi]``."""
    mid = (lo + hi + 1) // 2
    left = terms[mid] if mid == lo else _balanced(function, terms, ops, lo, mid - 1)
    right = terms[mid + 1] if mid == hi else _balanced(function, terms, ops, mid + 1, hi)
    return Call(ops[mid], function, None, [left, right])


def _recursing(node: Node) -> bool:
    """Whether cel-go's AST visitor counts ``node`` against its recursion depth."""
    if isinstance(node, Call):
        if node.target is not None:
            return True  # a receiver call
        return node.function in _VISITOR_COUNTED
    return isinstance(node, (Select, Index, Comprehension, Bind, OptMap))


def _children(node: Node) -> list[Node]:
    if isinstance(node, Call):
        return ([node.target] if node.target is not None else []) + list(node.args)
    if isinstance(node, Select):
        return [node.operand]
    if isinstance(node, Index):
        return [node.operand, node.index]
    if isinstance(node, CreateList):
        return list(node.elements)
    if isinstance(node, CreateMap):
        return [n for e in node.entries for n in (e.key, e.value)]
    if isinstance(node, CreateStruct):
        return [v for _, v, _ in node.fields]
    if isinstance(node, Comprehension):
        return [node.range, *node.args]
    if isinstance(node, Bind):
        return [node.init, node.body]
    if isinstance(node, OptMap):
        return [node.target, node.body]
    return []


def visitor_depth(root: Node) -> int:
    """The deepest count of visitor-recursing nodes on one root-to-leaf path (iterative)."""
    deepest = 0
    stack = [(root, 0)]
    while stack:
        node, above = stack.pop()
        here = above + _recursing(node)
        deepest = max(deepest, here)
        stack.extend((child, here) for child in _children(node))
    return deepest


def parse(expression: str, *, macros: bool = True) -> Node:
    """Parse ``expression`` to an AST; raise ``CelCompileError`` with a position on failure.

    cel-go's limits apply (``MAX_CODE_POINTS``, ``MAX_RECURSION_DEPTH``); the API server's
    10 KiB limit on a DRA selector is ``compile_selector``'s to apply.
    """
    if len(expression) > MAX_CODE_POINTS:
        raise CelCompileError(
            expression,
            None,
            "expression code point size exceeds limit: "
            f"size: {len(expression)}, limit {MAX_CODE_POINTS}",
        )
    with recursion_headroom():
        root = _Parser(expression, macros).parse()
    if visitor_depth(root) > MAX_RECURSION_DEPTH:
        raise CelCompileError(expression, None, "max recursion depth exceeded")
    return root
