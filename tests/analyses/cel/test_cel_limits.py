"""cel-go's parser limits and the API server's selector length limit, on both sides of each.

Sources (the constants' docstrings in dradiag/analyses/cel/parser.py and compiler.py):
cel-go parser/parser.go (NewParser: maxRecursionDepth 250, expressionSizeCodePointLimit
100,000; recursionListener "expression recursion limit exceeded: 250"; the visitor's
"max recursion depth exceeded"); Kubernetes' CELSelectorExpressionMaxLength = 10 * 1024
(k8s.io/api resource/v1 types.go), checked by validateCELSelector before compiling.
Every expression inside the limits must compile and evaluate, whatever its shape, with no
Python RecursionError or SyntaxError on the way (parser, checker, codegen, unparse).
"""

from __future__ import annotations

import sys

import pytest

from dradiag.analyses.cel import (
    CelCompileError,
    CelRuntimeError,
    cel_device,
    compile_expression,
    compile_selector,
)
from dradiag.analyses.cel.compiler import MAX_SELECTOR_BYTES
from dradiag.analyses.cel.parser import MAX_CODE_POINTS, MAX_RECURSION_DEPTH, parse
from dradiag.analyses.cel.unparse import unparse

DEVICE = cel_device(
    "gpu.nvidia.com",
    {
        "name": "gpu-0",
        "attributes": {"index": {"int": 3}, "uuid": {"string": "GPU-1"}},
        "capacity": {"memory": {"value": "80Gi"}},
    },
)
ATTR = "device.attributes['gpu.nvidia.com']"
RULE_LIMIT = f"expression recursion limit exceeded: {MAX_RECURSION_DEPTH}"
VISITOR_LIMIT = "max recursion depth exceeded"


def outcome(expression: str) -> object:
    """The selector's result on DEVICE, and every batch form agreeing with it."""
    selector = compile_selector(expression)
    result = selector.matches(DEVICE)
    assert selector.sweep([DEVICE, DEVICE]) == [result, result]
    assert selector.sweep([DEVICE], memoize=True) == [result]
    clauses = selector.evaluate_clauses(DEVICE)
    assert clauses.value == result
    return result


def compile_error(expression: str) -> CelCompileError:
    with pytest.raises(CelCompileError) as exc:
        compile_selector(expression)
    return exc.value


def fill(sep: str, terms: list[str], *, tail: str = "", room: int = 0) -> str:
    """``terms`` repeated and joined by ``sep`` up to 10 KiB (less ``room`` and ``tail``)."""
    out: list[str] = []
    size = len(tail) + room
    while True:
        term = terms[len(out) % len(terms)]
        grown = size + len(term) + (len(sep) if out else 0)
        if grown > MAX_SELECTOR_BYTES:
            return sep.join(out) + tail
        out.append(term)
        size = grown


def nested(depth: int, inner: str = "true") -> str:
    return "(" * depth + inner + ")" * depth


def test_the_limits_are_cel_go_defaults_and_the_api_servers() -> None:
    assert MAX_RECURSION_DEPTH == 250
    assert MAX_CODE_POINTS == 100_000
    assert MAX_SELECTOR_BYTES == 10_240


def test_nested_parentheses_within_the_limit_compile() -> None:
    assert outcome(nested(200)) is True
    assert outcome(nested(200, f"{ATTR}.index == 3")) is True
    assert outcome(nested(MAX_RECURSION_DEPTH - 1)) is True
    # The index `[...]` nests one more expression: 248 parentheses around it are the most.
    assert outcome(nested(MAX_RECURSION_DEPTH - 2, f"{ATTR}.index == 3")) is True
    assert compile_error(nested(MAX_RECURSION_DEPTH - 1, f"{ATTR}.index")).reason == RULE_LIMIT


@pytest.mark.parametrize(
    "expression",
    [nested(MAX_RECURSION_DEPTH), "(" * 2000, nested(MAX_RECURSION_DEPTH, "1 + 2 == 3")],
    ids=["250-nested", "2000-open", "250-nested-sum"],
)
def test_nesting_past_the_limit_is_cel_gos_error(expression: str) -> None:
    err = compile_error(expression)
    assert err.reason == RULE_LIMIT
    assert str(err) == f"ERROR: <input>:-1:0: {RULE_LIMIT}"  # cel-go's NoLocation form


def test_the_right_operand_of_an_operator_is_one_rule_deeper() -> None:
    # ANTLR parses a right operand with a nested call of the same rule, and cel-go's
    # listener counts it: 249 parentheses hold `true`, but not `1 + 2 == 3`.
    assert outcome(nested(MAX_RECURSION_DEPTH - 1)) is True
    assert compile_error(nested(MAX_RECURSION_DEPTH - 1, "1 + 2 == 3")).reason == RULE_LIMIT
    assert outcome(nested(MAX_RECURSION_DEPTH - 2, "1 + 2 == 3")) is True


@pytest.mark.parametrize(
    "shape",
    [
        lambda n: "[" * n + "1" + "]" * n + " != []",
        lambda n: "size(" + "string(" * (n - 1) + "'a'" + ")" * n + " > 0",
        lambda n: "!(" * n + "true" + ")" * n,
        lambda n: "-(" * n + "1" + ")" * n + " < 0",
    ],
    ids=["lists", "calls", "not", "negate"],
)
def test_other_nestings_on_both_sides_of_the_limit(shape: object) -> None:
    make = shape  # type: ignore[assignment]
    compile_selector(make(MAX_RECURSION_DEPTH - 2))  # type: ignore[operator]
    assert compile_error(make(MAX_RECURSION_DEPTH + 1)).reason == RULE_LIMIT  # type: ignore[operator]


def test_operator_chains_count_against_the_visitor_depth() -> None:
    # cel-go's visitor recurses once per relation/arithmetic operator of a left-deep chain.
    within = " + ".join(["1"] * MAX_RECURSION_DEPTH) + " > 0"  # 249 `+` and one `>`
    past = " + ".join(["1"] * (MAX_RECURSION_DEPTH + 1)) + " > 0"
    assert outcome(within) is True
    assert compile_error(past).reason == VISITOR_LIMIT
    # `==`, `.attributes`, `[...]` and `.uuid` are four visitor-counted nodes.
    selects = f"{ATTR}.uuid" + ".x" * (MAX_RECURSION_DEPTH - 4) + " == 'a'"
    assert isinstance(compile_selector(selects).sweep([DEVICE])[0], CelRuntimeError)
    too_many = f"{ATTR}.uuid" + ".x" * (MAX_RECURSION_DEPTH - 3) + " == 'a'"
    assert compile_error(too_many).reason == VISITOR_LIMIT


def test_logic_chains_are_balanced_as_cel_go_does() -> None:
    # 1,000 `&&` terms are fine for cel-go (it balances them) and for dradiag.
    expression = fill(" && ", [f"{ATTR}.index == 3", "device.driver == 'gpu.nvidia.com'", "true"])
    assert expression.count("&&") > 250
    assert outcome(expression) is True
    assert outcome(fill(" || ", ["false"], tail=" || true")) is True
    root = parse(" && ".join("abcdefgh"))
    assert unparse(root).count("&&") == 7

    def depth(node: object) -> int:
        args = getattr(node, "args", [])
        return 1 + max((depth(a) for a in args), default=0)

    assert depth(root) == 4  # 8 terms, log2(8) + 1 levels: balanced, not a chain of 7


def test_a_10_kib_expression_of_every_chain_shape_compiles() -> None:
    sums = "(" + " + ".join(["1"] * 200) + ") > 0"
    chains = {
        "and": fill(" && ", ["true"]),
        "or": fill(" || ", ["false"], tail=" || true"),
        "sums": fill(" && ", [sums]),
        "list": "[" + fill(", ", ["1"], room=40) + "].size() > 0",
        "in": fill(" || ", ["3 in [1, 2, 3]", "'a' in ['a']"]),
        "ternary-in-and": fill(" && ", [f"({ATTR}.index == 3 ? true : false)"]),
    }
    for name, expression in chains.items():
        size = len(expression.encode())
        assert MAX_SELECTOR_BYTES - 1000 < size <= MAX_SELECTOR_BYTES, name
        assert outcome(expression) is True, name


def test_selector_length_limit_is_the_api_servers() -> None:
    padding = "device.driver == '" + "x" * (MAX_SELECTOR_BYTES - 19) + "'"
    assert len(padding.encode()) == MAX_SELECTOR_BYTES
    assert outcome(padding) is False
    err = compile_error(padding[:-1] + "x'")
    assert err.reason == "Too long: may not be more than 10240 bytes"
    # Bytes, not characters, as Go's len(): 3,414 three-byte characters pass 10 KiB.
    wide = "device.driver == '" + "€" * 3414 + "'"
    assert len(wide) < MAX_SELECTOR_BYTES < len(wide.encode())
    assert compile_error(wide).reason.startswith("Too long")


def test_general_expressions_have_cel_gos_code_point_limit() -> None:
    text = "'" + "a" * (MAX_CODE_POINTS - 2) + "'"
    assert len(text) == MAX_CODE_POINTS
    assert compile_expression(text).evaluate() == "a" * (MAX_CODE_POINTS - 2)
    with pytest.raises(CelCompileError) as exc:
        compile_expression(text + " ")
    assert exc.value.reason == (
        f"expression code point size exceeds limit: size: {MAX_CODE_POINTS + 1}, "
        f"limit {MAX_CODE_POINTS}"
    )


def test_the_recursion_limit_is_restored() -> None:
    before = sys.getrecursionlimit()
    compile_selector(nested(240, f"{ATTR}.index == 3"))
    assert sys.getrecursionlimit() == before


def test_what_python_cannot_compile_is_a_clear_compile_error() -> None:
    # Python allows 20 nested blocks; 40 nested comprehensions are valid CEL (cel-go has no
    # nesting limit by default) but beyond this engine: a compile error that says so.
    inner = "true"
    for i in range(40):
        inner = f"[1].all(x{i}, {inner})"
    err = compile_error(inner)
    assert err.reason.startswith("expression too complex for dradiag's CEL engine")


@pytest.mark.parametrize(
    ("expression", "column"),
    [("日本語", 1), ("x日 == 1", 2), ("٣ == 3", 1), ("device.driver == 'gpu' && é", 27)],
)
def test_a_non_ascii_letter_or_digit_outside_a_string_is_cel_gos_token_error(
    expression: str, column: int
) -> None:
    # str.isalpha()/isdigit() are true for them, and the ASCII-only scan did not advance
    # past one: the lexer looped forever, growing without bound (found by bench/fuzz.py).
    err = compile_error(expression)
    assert err.reason == f"Syntax error: token recognition error at: '{expression[column - 1]}'"
    assert outcome("device.driver == '日本語'") is False
