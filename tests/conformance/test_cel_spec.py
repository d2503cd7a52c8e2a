"""Google's CEL conformance data (conformance/cel-spec/*.textproto) run through dradiag's engine.

Applicable: the tests that need no protobuf messages, wrappers, timestamps, durations,
containers or unknowns (dradiag's CEL has none of these: DRA selectors never see them).
``dynamic.textproto`` (wrappers, Any, Struct) and ``type_deduction.textproto`` (checker
type-deduction only) are out of scope as whole files. Every applicable test either passes
or is listed with a reason in ``cel_spec_skips.yaml``; at least 98 % must pass.

protobuf is not installed, so a small text-format reader below parses the
``SimpleTestFile`` shape (cel/expr/conformance/test/simple.proto, cel/expr/value.proto).
"""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from dradiag.analyses.cel import CelError, compile_expression
from dradiag.analyses.cel.runtime import CelType, OptionalValue, Uint
from dradiag.analyses.cel.typesys import parse_type

SPEC_DIR = Path(__file__).with_name("data") / "cel-spec"
SKIPS_FILE = Path(__file__).with_name("cel_spec_skips.yaml")

FILES = [
    "basic", "bindings_ext", "comparisons", "conversions", "fields", "fp_math", "integer_math",
    "lists", "logic", "macros", "macros2", "optionals", "parse", "plumbing", "string", "string_ext",
]  # fmt: skip
OUT_OF_SCOPE_FILES = {
    "dynamic": "protobuf wrappers, Any, Struct",
    "type_deduction": "checker-only type deduction",
}


# --------------------------------------------------------------------------------------
# A tiny protobuf text-format reader
# --------------------------------------------------------------------------------------
_TOKEN = re.compile(
    r"""\s+|\#[^\n]*|(?P<str>"(?:[^"\\\n]|\\.)*"|'(?:[^'\\\n]|\\.)*')|(?P<punct>[{}:<>\[\],;])|(?P<word>[-+./\w]+)""",
    re.S,
)


def _unescape(body: str) -> bytes:
    out = bytearray()
    i = 0
    raw = body.encode("utf-8")
    while i < len(raw):
        c = raw[i]
        if c != 0x5C:
            out.append(c)
            i += 1
            continue
        n = chr(raw[i + 1])
        simple = {
            "n": 10,
            "t": 9,
            "r": 13,
            "a": 7,
            "b": 8,
            "f": 12,
            "v": 11,
            "\\": 92,
            "'": 39,
            '"': 34,
            "?": 63,
        }
        if n in simple:
            out.append(simple[n])
            i += 2
        elif n in "xX":
            j = i + 2
            while j < len(raw) and j < i + 4 and chr(raw[j]) in "0123456789abcdefABCDEF":
                j += 1
            out.append(int(raw[i + 2 : j], 16))
            i = j
        elif n in "01234567":
            j = i + 1
            while j < len(raw) and j < i + 4 and chr(raw[j]) in "01234567":
                j += 1
            out.append(int(raw[i + 1 : j], 8) & 0xFF)
            i = j
        elif n in "uU":
            width = 4 if n == "u" else 8
            out += chr(int(raw[i + 2 : i + 2 + width], 16)).encode("utf-8", "surrogatepass")
            i += 2 + width
        else:
            raise ValueError(f"bad escape \\{n}")
    return bytes(out)


def _tokens(text: str) -> list[tuple[str, Any]]:
    out: list[tuple[str, Any]] = []
    pos = 0
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if m is None:
            raise ValueError(f"textproto: cannot read at {text[pos : pos + 30]!r}")
        pos = m.end()
        if m.group("str"):
            s = _unescape(m.group("str")[1:-1])
            if out and out[-1][0] == "str":  # adjacent string literals concatenate
                out[-1] = ("str", out[-1][1] + s)
            else:
                out.append(("str", s))
        elif m.group("punct"):
            out.append(("p", m.group("punct")))
        elif m.group("word"):
            out.append(("w", m.group("word")))
    return out


def parse_textproto(text: str) -> dict[str, list[Any]]:
    toks = _tokens(text)
    pos = 0

    def message(close: str | None) -> dict[str, list[Any]]:
        nonlocal pos
        msg: dict[str, list[Any]] = {}
        while pos < len(toks):
            kind, val = toks[pos]
            if kind == "p" and val == close:
                pos += 1
                return msg
            if kind == "p" and val in ",;":
                pos += 1
                continue
            if kind == "p" and val == "[":
                end = toks.index(("p", "]"), pos)
                name = "[" + "".join(str(t[1]) for t in toks[pos + 1 : end]) + "]"
                pos = end + 1
            else:
                name = val
                pos += 1
            if toks[pos] == ("p", ":"):
                pos += 1
            kind, val = toks[pos]
            if kind == "p" and val in "{<":
                pos += 1
                value: Any = message("}" if val == "{" else ">")
            elif kind == "p" and val == "[":
                pos += 1
                items: list[Any] = []
                while toks[pos] != ("p", "]"):
                    if toks[pos] == ("p", ","):
                        pos += 1
                        continue
                    items.append(toks[pos][1])
                    pos += 1
                pos += 1
                msg.setdefault(name, []).extend(items)
                continue
            else:
                value = val
                pos += 1
            msg.setdefault(name, []).append(value)
        return msg

    return message(None)


def _one(msg: dict[str, list[Any]], field: str, default: Any = None) -> Any:
    vals = msg.get(field)
    return vals[0] if vals else default


class NotApplicable(Exception):
    pass


def _number(word: Any) -> float:
    w = str(word).lower()
    if w in ("inf", "infinity"):
        return math.inf
    if w in ("-inf", "-infinity"):
        return -math.inf
    if w == "nan":
        return math.nan
    return float(w)


def to_python(value: dict[str, list[Any]]) -> Any:
    """cel.expr.Value -> dradiag's plain-Python CEL value."""
    if "int64_value" in value:
        return int(_one(value, "int64_value"))
    if "uint64_value" in value:
        return Uint(int(_one(value, "uint64_value")))
    if "double_value" in value:
        return _number(_one(value, "double_value"))
    if "string_value" in value:
        return _one(value, "string_value").decode("utf-8")
    if "bytes_value" in value:
        return _one(value, "bytes_value")
    if "bool_value" in value:
        return _one(value, "bool_value") == "true"
    if "null_value" in value:
        return None
    if "list_value" in value:
        lst = _one(value, "list_value")
        return [to_python(v) for v in lst.get("values", [])]
    if "map_value" in value:
        mp = _one(value, "map_value")
        return {
            to_python(_one(e, "key")): to_python(_one(e, "value")) for e in mp.get("entries", [])
        }
    if "type_value" in value:
        name = _one(value, "type_value").decode("utf-8")
        if "." in name and name not in ("google.protobuf.Value",):
            raise NotApplicable(f"type {name}")
        return CelType(name)
    if not value:
        # An empty Value (e.g. `value {}`) never appears in applicable tests.
        raise NotApplicable("empty value")
    raise NotApplicable(f"value kind {sorted(value)}")


def strict_equal(a: Any, b: Any) -> bool:
    """Equality that also demands the same CEL type (1 != 1u != 1.0 here) and NaN == NaN."""
    if a.__class__ is not b.__class__:
        if isinstance(a, list | tuple) and isinstance(b, list | tuple):
            pass
        else:
            return False
    if isinstance(a, float):
        return (math.isnan(a) and math.isnan(b)) or (
            a == b and math.copysign(1, a) == math.copysign(1, b)
        )
    if isinstance(a, list | tuple):
        return len(a) == len(b) and all(strict_equal(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict):
        if len(a) != len(b):
            return False
        for k, v in a.items():
            match = [bv for bk, bv in b.items() if strict_equal(bk, k)]
            if len(match) != 1 or not strict_equal(v, match[0]):
                return False
        return True
    if isinstance(a, OptionalValue):
        return a.present == b.present and (not a.present or strict_equal(a.value, b.value))
    return bool(a == b)


_UNSUPPORTED_EXPR = re.compile(
    r"google\.protobuf|TestAllTypes|NestedTest|proto[23]|cel\.expr|timestamp|duration|"
    r"getDate|getDay|getFull|getHours|getMinutes|getSeconds|getMilli|getMonth|\bAny\b|\.Enum|GlobalEnum|"
    r"dev\.cel|cel\.block|cel\.index|cel\.iterVar|cel\.accuVar"
)


def _primitive(t: dict[str, list[Any]]) -> Any:
    if "primitive" in t:
        return {
            "INT64": "int",
            "UINT64": "uint",
            "DOUBLE": "double",
            "BOOL": "bool",
            "STRING": "string",
            "BYTES": "bytes",
        }[_one(t, "primitive")]
    if "list_type" in t:
        elem = _one(_one(t, "list_type"), "elem_type")
        return f"list({_primitive(elem)})"
    if "map_type" in t:
        mt = _one(t, "map_type")
        return f"map({_primitive(_one(mt, 'key_type'))},{_primitive(_one(mt, 'value_type'))})"
    if "dyn" in t:
        return "dyn"
    if "null" in t:
        return "null_type"
    raise NotApplicable(f"declared type {sorted(t)}")


def prepare(test: dict[str, list[Any]]) -> dict[str, Any]:
    """Turn one SimpleTest into a runnable case or raise NotApplicable."""
    expr = _one(test, "expr").decode("utf-8")
    if _UNSUPPORTED_EXPR.search(expr):
        raise NotApplicable("uses protobuf messages, timestamps or durations")
    if _one(test, "container"):
        raise NotApplicable("container")
    if "unknown" in test or "any_unknowns" in test:
        raise NotApplicable("unknowns")
    if _one(test, "check_only") == "true":
        raise NotApplicable("check-only (type deduction)")
    variables = {}
    for decl in test.get("type_env", []):
        name = _one(decl, "name").decode("utf-8")
        ident = _one(decl, "ident")
        if ident is None:
            raise NotApplicable("function declaration in type_env")
        variables[name] = parse_type(_primitive(_one(ident, "type")))
    bindings = {}
    for entry in test.get("bindings", []):
        key = _one(entry, "key").decode("utf-8")
        expr_value = _one(entry, "value")
        if "value" not in expr_value:
            raise NotApplicable("error/unknown binding")
        bindings[key] = to_python(_one(expr_value, "value"))
        variables.setdefault(key, parse_type("dyn"))
    case: dict[str, Any] = {
        "expr": expr,
        "variables": variables,
        "bindings": bindings,
        "check": _one(test, "disable_check") != "true",
        "macros": _one(test, "disable_macros") != "true",
    }
    if "value" in test:
        case["expect"] = ("value", to_python(_one(test, "value")))
    elif "typed_result" in test:
        case["expect"] = ("value", to_python(_one(_one(test, "typed_result"), "result")))
    elif "eval_error" in test or "any_eval_errors" in test:
        case["expect"] = ("error", None)
    else:
        case["expect"] = ("value", True)  # SimpleTest default: the result is `true`
    return case


def run_case(case: dict[str, Any]) -> tuple[bool, str]:
    try:
        compiled = compile_expression(
            case["expr"],
            variables=case["variables"],
            check_types=case["check"],
            macros=case["macros"],
        )
        result = compiled.evaluate(case["bindings"])
    except CelError as exc:
        if case["expect"][0] == "error":
            return True, ""
        return False, f"error: {exc}"
    except RecursionError:
        return False, "python recursion limit"
    if case["expect"][0] == "error":
        return False, f"expected an error, got {result!r}"
    if not strict_equal(result, case["expect"][1]):
        return False, f"got {result!r}, want {case['expect'][1]!r}"
    return True, ""


def load_cases() -> tuple[dict[str, dict[str, Any]], dict[str, str]]:
    cases: dict[str, dict[str, Any]] = {}
    not_applicable: dict[str, str] = {}
    for file in FILES:
        doc = parse_textproto((SPEC_DIR / f"{file}.textproto").read_text())
        for section in doc.get("section", []):
            sname = _one(section, "name").decode("utf-8")
            for test in section.get("test", []):
                tid = f"{file}/{sname}/{_one(test, 'name').decode('utf-8')}"
                try:
                    cases[tid] = prepare(test)
                except NotApplicable as exc:
                    not_applicable[tid] = str(exc)
    return cases, not_applicable


CASES, NOT_APPLICABLE = load_cases()
SKIPS: dict[str, str] = yaml.safe_load(SKIPS_FILE.read_text()) or {}


@pytest.mark.parametrize("test_id", sorted(CASES))
def test_cel_spec(test_id: str) -> None:
    ok, detail = run_case(CASES[test_id])
    if test_id in SKIPS:
        if ok:
            pytest.fail(
                f"listed in cel_spec_skips.yaml but passes now; remove it ({SKIPS[test_id]})"
            )
        pytest.skip(SKIPS[test_id])
    assert ok, detail


def test_pass_rate_and_skip_list() -> None:
    unknown = sorted(set(SKIPS) - set(CASES))
    assert not unknown, (
        f"cel_spec_skips.yaml names tests that do not exist or are not applicable: {unknown}"
    )
    applicable = len(CASES)
    passing = applicable - len(SKIPS)
    assert applicable > 1000
    assert passing / applicable >= 0.98, f"{passing}/{applicable} pass"


if __name__ == "__main__":
    failures = {
        tid: run_case(case)[1] for tid, case in sorted(CASES.items()) if not run_case(case)[0]
    }
    for tid, why in failures.items():
        print(f"{tid}: {why}")
    print(f"{len(CASES)} applicable, {len(failures)} failing, {len(NOT_APPLICABLE)} not applicable")
