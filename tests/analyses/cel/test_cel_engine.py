"""Parser, runtime semantics, libraries, errors with positions, memoization and cost limit."""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import pytest

from dradiag.analyses.cel import (
    CelCompileError,
    CelRuntimeError,
    cel_device,
    compile_expression,
    compile_selector,
)

GPU = cel_device(
    "gpu.nvidia.com",
    {
        "name": "gpu-0",
        "attributes": {
            "type": {"string": "gpu"},
            "uuid": {"string": "GPU-1"},
            "productName": {"string": "NVIDIA H100 80GB HBM3"},
            "driverVersion": {"version": "580.65.6"},
            "index": {"int": 3},
            "ids": {"ints": [1, 2]},
            "resource.kubernetes.io/pciBusID": {"string": "0000:65:00.0"},
            "gpu.nvidia.com/qualified": {"bool": True},
        },
        "capacity": {"memory": {"value": "80Gi"}},
    },
)


def ev(expr: str) -> Any:
    """Evaluate a general expression; return the value or 'error'."""
    try:
        return compile_expression(expr, kubernetes_validators=True).evaluate()
    except (CelRuntimeError, CelCompileError):
        return "error"


def sel(expr: str, device: Any = GPU) -> Any:
    try:
        return compile_selector(expr).matches(device)
    except CelRuntimeError as exc:
        return f"error: {exc.message}"


@pytest.mark.parametrize(
    ("expr", "expected"),
    [
        # literals and parsing
        ("0x10 + 1", 17),
        ("-9223372036854775808", -(2**63)),
        ("--1", 1),
        ("!!true", True),
        ("r'\\d' == '\\\\d'", True),
        ("'''a\nb''' == 'a\\nb'", True),
        ("b'\\xff' == b'\\377'", True),
        ("'\\u00e9'.size()", 1),
        ("1 + 2 * 3 - 4 / 2 % 3", 5),
        ("true ? 1 : 2", 1),
        ("{'a': [1, 2]}['a'][1]", 2),
        # heterogeneous equality and ordering
        ("dyn(1) == 1.0", True),
        ("dyn(true) == 1", False),
        ("dyn('a') == 1", False),
        ("dyn([1, 2]) == [1.0, 2.0]", True),
        ("dyn(1) < 1.5", True),
        ("dyn(1) < 'a'", "error"),
        ("dyn(true) < 2", "error"),
        ("null == null", True),
        ("dyn(0) == null", False),
        # errors and absorption
        ("1 / 0 == 1 && false", False),
        ("false && 1 / 0 == 1", False),
        ("1 / 0 == 1 || true", True),
        ("1 / 0 == 1 && true", "error"),
        ("!(1 / 0 == 1)", "error"),
        ("9223372036854775807 + 1", "error"),
        ("-9223372036854775808 - 1", "error"),
        ("-(-9223372036854775808)", "error"),
        ("18446744073709551615u + 1u", "error"),
        ("0u - 1u", "error"),
        ("7 / -2", -3),
        ("-7 % 3", -1),
        ("1.0 / 0.0 > 1e308", True),
        ("[1, 2][-1]", "error"),
        ("{'a': 1}['b']", "error"),
        ("dyn({1: 'x'})[1.0]", "x"),
        ("{1: 'x'}[1.0]", "error"),  # rejected by the checker, as in cel-go
        # macros
        ("[0, 1].exists(x, 1 / x == 1)", True),
        ("[0, 1].all(x, 1 / x > 5)", False),
        ("[1, 2, 3].exists_one(x, x > 2)", True),
        ("[1, 2, 3].map(x, x * 2)", [2, 4, 6]),
        ("[1, 2, 3].map(x, x > 1, x * 2)", [4, 6]),
        ("[1, 2, 3].filter(x, x % 2 == 1)", [1, 3]),
        ("{'a': 1, 'b': 2}.all(k, v, v > 0)", True),
        ("[10, 20].exists(i, v, i == 1 && v == 20)", True),
        ("[1, 2].transformList(i, v, v + i)", [1, 3]),
        ("'ab'.exists(x, x == 'a')", "error"),
        ("cel.bind(x, 2, x * x)", 4),
        ("cel.bind(x, 1 / 0, true)", True),
        # optionals
        ("{'a': 1}.?b.orValue(7)", 7),
        ("{'a': 1}.?a.orValue(7)", 1),
        ("{'a': 1}[?'a'].hasValue()", True),
        ("optional.none().orValue(3)", 3),
        ("[1, ?optional.none(), ?optional.of(2)]", [1, 2]),
        # strings
        ("'ABC'.lowerAscii()", "abc"),
        ("'Ü'.lowerAscii()", "Ü"),
        ("'a,b,c'.split(',')", ["a", "b", "c"]),
        ("'hello'.substring(1, 3)", "el"),
        ("'  x '.trim()", "x"),
        ("['a', 'b'].join('-')", "a-b"),
        ("'%s=%d'.format(['a', 1])", "a=1"),
        ("'abc'.indexOf('c')", 2),
        ("'aaa'.replace('a', 'b', 2)", "bba"),
        ("'abc'.charAt(3)", ""),
        ("'héllo'.size()", 5),
        # regex (RE2)
        ("'h100'.matches('h1[0-9]+')", True),
        ("'٣'.matches('\\\\d')", False),  # \d is ASCII in RE2, Unicode in Python re
        ("'a\\n'.matches('a$')", False),  # $ does not match before a trailing newline in RE2
        ("'abc'.find('b.')", "bc"),
        ("'a1b2'.findAll('[0-9]')", ["1", "2"]),
        # lists and sets
        ("[3, 1, 2].sort()", [1, 2, 3]),
        ("[1, 2, 3].sum()", 6),
        ("[1, 2].isSorted()", True),
        ("[[1], [2, 3]].flatten()", [1, 2, 3]),
        ("lists.range(3)", [0, 1, 2]),
        ("sets.contains([1, 2, 3], [2])", True),
        ("sets.intersects([1], [2])", False),
        # Kubernetes libraries
        ("quantity('1Gi').isGreaterThan(quantity('1000Mi'))", True),
        ("quantity('1Gi').compareTo(quantity('1024Mi'))", 0),
        ("quantity('1.5').isInteger()", False),
        ("quantity('2').add(3).asInteger()", 5),
        ("quantity('200K')", "error"),
        ("isQuantity('200k')", True),
        ("quantity('1') == quantity('1000m')", True),
        ("semver('1.2.3').major()", 1),
        ("semver('1.0', true) == semver('1.0.0')", True),
        ("semver('1.0')", "error"),
        ("semver('1.0.0-rc.1').isLessThan(semver('1.0.0'))", True),
        ("isSemver('v1.0.0')", False),
        ("dyn(semver('1.0.0')) == '1.0.0'", "error"),
        ("dyn(quantity('1')) == 1", "error"),
        ("'1.0.0' == dyn(semver('1.0.0'))", False),
        ("url('https://example.com:8080/p?q=1').getPort()", "8080"),
        ("ip('10.0.0.1').family()", 4),
        ("cidr('10.0.0.0/8').containsIP('10.1.2.3')", True),
    ],
)
def test_semantics(expr: str, expected: Any) -> None:
    result = ev(expr)
    if isinstance(expected, bool):
        assert result is expected
    else:
        assert result == expected and type(result) is type(expected)


def test_compile_time_type_errors() -> None:
    with pytest.raises(CelCompileError) as exc:
        compile_selector('device.capacity["gpu.nvidia.com"].memory > quantity("1Gi")')
    assert "found no matching overload for '_>_'" in exc.value.reason
    assert "kubernetes.Quantity" in exc.value.reason
    with pytest.raises(CelCompileError, match="must evaluate to bool or the unknown type, not int"):
        compile_selector("1 + 1")
    with pytest.raises(CelCompileError, match="undefined field 'name'"):
        compile_selector("device.name == 'x'")
    with pytest.raises(CelCompileError, match="expected type 'int' but found 'string'"):
        compile_selector("[1, 'a'].size() > 0")


def test_compile_error_position_and_caret() -> None:
    with pytest.raises(CelCompileError) as exc:
        compile_selector('device.attributes["x"].y ==\n  1 + "a"')
    err = exc.value
    assert (err.line, err.column) == (2, 5)
    assert err.position == len('device.attributes["x"].y ==\n  1 ')
    assert str(err).startswith("ERROR: <input>:2:5: found no matching overload for '_+_'")
    assert err.render_caret() == '  1 + "a"\n    ^\n' + err.reason


def test_syntax_error_has_a_position() -> None:
    with pytest.raises(CelCompileError) as exc:
        compile_selector("device.driver == ")
    assert exc.value.position == len("device.driver == ")


def test_device_environment() -> None:
    assert sel("device.attributes['gpu.nvidia.com'].type == 'gpu'") is True
    assert sel("device.attributes['resource.kubernetes.io'].pciBusID.startsWith('0000')") is True
    assert sel("device.attributes['gpu.nvidia.com'].qualified") is True
    assert sel("'x' in device.attributes['unknown.example.com']") is False
    assert sel("'unknown.example.com' in device.attributes") is False
    assert sel("device.attributes['gpu.nvidia.com'].missing == 1") == "error: no such key: missing"
    assert sel("has(device.attributes['gpu.nvidia.com'].missing)") is False
    assert sel("device.attributes['gpu.nvidia.com'].?missing.orValue(1) == 1") is True
    assert sel("device.attributes['gpu.nvidia.com'].productName == 5") is False
    assert sel("device.attributes['gpu.nvidia.com'].productName > 5") == "error: no such overload"
    assert (
        sel("device.attributes['gpu.nvidia.com'].ids")
        == "error: CEL result of type list could not be converted to bool"
    )
    assert sel("device.capacity['gpu.nvidia.com'].memory.isGreaterThan(quantity('40Gi'))") is True
    assert sel("device.allowMultipleAllocations") is False
    assert sel("device.attributes['gpu.nvidia.com'].index.exists(x, x > 0)") == (
        "error: got 'types.Int', expected iterable type"
    )


def test_bad_version_attribute_fails_every_selector() -> None:
    dev = cel_device("d", {"attributes": {"v": {"version": "1.0"}}})
    assert sel("true", dev).startswith("error: attribute v: parse semantic version")


def test_read_keys_and_memoization() -> None:
    s = compile_selector(
        "device.driver == 'gpu.nvidia.com' && cel.bind(a, device.attributes['gpu.nvidia.com'], "
        "a.type == 'gpu' && 'uuid' in a) && device.capacity['gpu.nvidia.com']['memory']"
        ".compareTo(quantity('1Gi')) > 0"
    )
    assert s.reads_driver is True
    assert s.read_keys == {
        ("attribute", "gpu.nvidia.com", "type"),
        ("attribute", "gpu.nvidia.com", "uuid"),
        ("capacity", "gpu.nvidia.com", "memory"),
    }
    assert s.result_type == "bool"
    dyn = compile_selector("device.attributes['gpu.nvidia.com'].exists(k, k == 'type')")
    assert ("attribute", "gpu.nvidia.com", None) in dyn.read_keys

    memo = s.memoized()
    devices = [
        cel_device(
            "gpu.nvidia.com",
            {
                "attributes": {"type": {"string": "gpu"}, "uuid": {"string": f"GPU-{i}"}},
                "capacity": {"memory": {"value": "2Gi"}},
            },
        )
        for i in range(50)
    ]
    assert all(memo(d) for d in devices)
    # uuid's presence is read, its value too (key in read_keys): one entry per distinct uuid
    assert len(memo.cache) == 50  # type: ignore[attr-defined]
    t = compile_selector("device.attributes['gpu.nvidia.com'].type == 'gpu'").memoized()
    assert all(t(d) for d in devices)
    assert len(t.cache) == 1  # type: ignore[attr-defined]
    err = compile_selector("device.attributes['gpu.nvidia.com'].nope == 1").memoized()
    for d in devices[:3]:
        with pytest.raises(CelRuntimeError, match="no such key: nope"):
            err(d)


def test_evaluate_clauses() -> None:
    s = compile_selector(
        "device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == 'mig' "
        "&& device.attributes['gpu.nvidia.com'].nope"
    )
    tree = s.evaluate_clauses(GPU)
    assert tree.operator == "&&"
    assert [c.value for c in tree.children] == [True, False, None]
    assert tree.children[2].error == "no such key: nope"
    assert tree.value is False


def test_cost_limit() -> None:
    expr = (
        "[1,2,3,4,5,6,7,8,9,10].all(a, [1,2,3,4,5,6,7,8,9,10].all(b, [1,2,3,4,5,6,7,8,9,10].all(c, "
        "[1,2,3,4,5,6,7,8,9,10].all(d, [1,2,3,4,5,6,7,8,9,10].all(e, [1,2,3,4,5,6,7,8,9,10].all(f, true))))))"
    )
    with pytest.raises(CelRuntimeError, match="actual cost limit exceeded"):
        compile_selector(expr).matches(GPU)
    assert compile_selector("[1,2,3].all(a, [1,2,3].all(b, a + b > 0))").matches(GPU) is True


def test_compile_cache() -> None:
    assert compile_selector("true") is compile_selector("true")


def test_import_is_lazy() -> None:
    code = (
        "import sys, dradiag.analyses.cel as c; "
        "assert 're2' not in sys.modules; assert 'celpy' not in sys.modules; "
        "assert 'cel_expr_python' not in sys.modules; "
        "c.compile_selector(\"device.driver.matches('^a.c$')\"); assert 're2' in sys.modules"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


# --------------------------------------------------------------------------------------
# Batch API, flat value layout, memoization by device class
# --------------------------------------------------------------------------------------
def _fleet() -> list[Any]:
    devices = []
    for i in range(12):
        attrs: dict[str, Any] = {
            "type": {"string": "mig" if i % 3 == 0 else "gpu"},
            "uuid": {"string": f"GPU-{i}"},
            "driverVersion": {
                "version": ["550.54.15", "550.0.0", "550.0.0-rc.1", "535.0.0"][i % 4]
            },
            "productName": {"string": ["NVIDIA H100 80GB HBM3", "Tesla T4", "ÀH100"][i % 3]},
        }
        if i % 5 == 4:
            del attrs["productName"]
        if i == 7:
            attrs["driverVersion"] = {"version": "1.0"}  # not strict semver: device.error
        devices.append(
            cel_device(
                "gpu.nvidia.com" if i % 6 else "other.example.com",
                {
                    "name": f"d{i}",
                    "attributes": attrs,
                    "capacity": {"memory": {"value": f"{10 * (i % 4)}Gi"}},
                },
            )
        )
    return devices


def _matches_all(s: Any, devices: list[Any]) -> list[Any]:
    out: list[Any] = []
    for d in devices:
        try:
            out.append(s.matches(d))
        except CelRuntimeError as exc:
            out.append(("error", type(exc).__name__, exc.message))
    return out


def _plain(results: list[Any]) -> list[Any]:
    return [
        ("error", type(r).__name__, r.message) if isinstance(r, CelRuntimeError) else r
        for r in results
    ]


@pytest.mark.parametrize(
    "expr",
    [
        "device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == 'mig'",
        "device.attributes['gpu.nvidia.com'].productName.lowerAscii().matches('h100')",
        "device.attributes['gpu.nvidia.com'].driverVersion.isGreaterThan(semver('550.0.0')) || "
        "device.attributes['gpu.nvidia.com'].nope",
        "device.attributes['gpu.nvidia.com'].driverVersion.isLessThan(semver('550.0.0'))",
        "device.attributes['gpu.nvidia.com'].driverVersion.compareTo(semver('550.0.0')) == 0",
        "device.attributes['gpu.nvidia.com'].driverVersion.compareTo(semver('550.0.0-rc.2')) < 0",
        "device.capacity['gpu.nvidia.com'].memory.compareTo(quantity('20Gi')) >= 0",
        "has(device.attributes['gpu.nvidia.com'].productName) && 'uuid' in device.attributes['gpu.nvidia.com']",
        "cel.bind(t, device.attributes['gpu.nvidia.com'].type, t == 'gpu' || t == 'mig')",
        "device.attributes['gpu.nvidia.com'].exists(k, k == 'productName')",
        "dyn(device.attributes['gpu.nvidia.com'].type)",
        "device.attributes['gpu.nvidia.com'].type.size() > 2 && device.attributes['gpu.nvidia.com'].productName != ''",
        "[1, 2, 3].all(a, [1, 2, 3].all(b, a + b > 0)) && device.attributes['gpu.nvidia.com'].type == 'gpu'",
    ],
)
def test_sweep_and_select_equal_matches(expr: str) -> None:
    s = compile_selector(expr)
    devices = _fleet()
    expected = _matches_all(s, devices)
    assert _plain(s.sweep(devices)) == expected
    assert _plain(s.sweep(devices, memoize=True)) == expected
    assert _plain(s.sweep(devices, memoize=True)) == expected
    for memoize in (False, True):
        matched, errors = s.select(devices, memoize=memoize)
        assert matched == [i for i, v in enumerate(expected) if v is True]
        assert [(i, ("error", type(e).__name__, e.message)) for i, e in errors] == [
            (i, v) for i, v in enumerate(expected) if isinstance(v, tuple)
        ]


def test_sweep_keeps_runtime_errors() -> None:
    devices = _fleet()
    results = compile_selector("device.attributes['gpu.nvidia.com'].nope == 1").sweep(devices)
    assert all(isinstance(r, CelRuntimeError) for r in results)
    assert results[0].message == "no such key: nope"
    assert results[7].message.startswith("attribute driverVersion: parse semantic version")
    # Kept as values: no traceback (a sweep's frame would keep every device alive).
    assert all(r.__traceback__ is None and r.__context__ is None for r in results)
    memo_results = compile_selector("device.attributes['gpu.nvidia.com'].nope == 2").sweep(
        devices, memoize=True
    )
    assert all(r.__traceback__ is None for r in memo_results)
    expensive = compile_selector(
        "[1,2,3,4,5,6,7,8,9,10].all(a, [1,2,3,4,5,6,7,8,9,10].all(b, [1,2,3,4,5,6,7,8,9,10].all(c, "
        "[1,2,3,4,5,6,7,8,9,10].all(d, [1,2,3,4,5,6,7,8,9,10].all(e, [1,2,3,4,5,6,7,8,9,10].all(f, true))))))"
    )
    (only,) = expensive.sweep([GPU])
    assert isinstance(only, CelRuntimeError) and "actual cost limit exceeded" in only.message
    assert expensive.select([GPU])[1][0][0] == 0
    assert compile_selector("true").sweep(iter([GPU, GPU])) == [True, True]  # any iterable


def test_value_layout_is_unambiguous() -> None:
    # driver "a/b" puts "c" under domain "a/b"; "a/b/c" is domain "a", name "b/c".
    dev = cel_device(
        "a/b",
        {"attributes": {"c": {"int": 1}, "a/b/c": {"int": 2}}, "capacity": {"c": {"value": "3"}}},
    )
    assert sel("device.attributes['a/b'].c == 1", dev) is True
    assert sel("device.attributes['a']['b/c'] == 2", dev) is True
    assert sel("device.capacity['a/b'].c == quantity('3')", dev) is True
    assert sel("device.capacity['a/b'].c.compareTo(quantity('3')) == 0", dev) is True
    assert sel("'c' in device.capacity['a/b'] && !has(device.attributes['a'].c)", dev) is True
    # The same name twice (qualified and not): the later one wins, as in device.attributes.
    dup = cel_device(
        "gpu.nvidia.com", {"attributes": {"x": {"int": 1}, "gpu.nvidia.com/x": {"int": 2}}}
    )
    assert sel("device.attributes['gpu.nvidia.com'].x == 2", dup) is True
    assert (
        sel(
            "device.attributes['gpu.nvidia.com'].all(k, device.attributes['gpu.nvidia.com'][k] == 2)",
            dup,
        )
        is True
    )


def test_inlined_specialisations_match_the_library() -> None:
    dev = cel_device("d", {"attributes": {"v": {"version": "2.0.0-rc.1"}, "s": {"string": "ÀbC"}}})
    assert sel("device.attributes['d'].v.isLessThan(semver('2.0.0'))", dev) is True
    assert sel("device.attributes['d'].v.isGreaterThan(semver('2.0.0'))", dev) is False
    assert sel("device.attributes['d'].v.compareTo(semver('2.0.0')) == -1", dev) is True
    assert sel("device.attributes['d'].v.compareTo(semver('1.9.9')) == 1", dev) is True
    assert sel("device.attributes['d'].v.isGreaterThan(semver('2.0.0-rc.0'))", dev) is True
    assert sel("device.attributes['d'].s.lowerAscii() == 'Àbc'", dev) is True
    assert sel("device.attributes['d'].s.upperAscii() == 'ÀBC'", dev) is True
    assert sel("device.attributes['d'].v.lowerAscii() == ''", dev) == "error: no such overload"


def test_inlined_string_tests_match_the_library() -> None:
    """startsWith/endsWith/contains with a literal argument are inlined (no call per
    device): the same answers, on a string and on a value that is not one."""
    dev = cel_device("d", {"attributes": {"s": {"string": "GPU-0a"}, "n": {"int": 7}}})
    for fn, arg, want in [
        ("startsWith", "GPU-", True),
        ("startsWith", "0a", False),
        ("endsWith", "0a", True),
        ("endsWith", "GPU", False),
        ("contains", "U-0", True),
        ("contains", "x", False),
        ("startsWith", "", True),
    ]:
        expr = f"device.attributes['d'].s.{fn}('{arg}')"
        compiled = compile_selector(expr)
        inlined = {"startsWith": ".startswith(", "endsWith": ".endswith(", "contains": "' in _t"}
        assert inlined[fn] in compiled.source
        assert sel(expr, dev) is want, expr
        # Rows (a column of values) and a sweep give the same.
        found = compiled.rows()
        assert found is not None
        assert found[0]([("GPU-0a",)]) == [want]
        assert compiled.sweep([dev]) == [want]
        assert sel(f"device.attributes['d'].n.{fn}('{arg}')", dev) == "error: no such overload"


def test_memo_classes_are_shared_by_key_set(monkeypatch: pytest.MonkeyPatch) -> None:
    from dradiag.analyses.cel import compiler

    devices = _fleet()
    a = compile_selector("device.attributes['gpu.nvidia.com'].type == 'gpu'")
    b = compile_selector("device.attributes['gpu.nvidia.com'].type != 'mig'")
    c = compile_selector("device.capacity['gpu.nvidia.com'].memory.isGreaterThan(quantity('15Gi'))")
    for _ in range(2):  # alternate key sets: each device keeps a class per key set
        for s in (a, b, c):
            assert _plain(s.sweep(devices, memoize=True)) == _matches_all(s, devices)
    assert devices[0].memo_more is not None and len(devices[0].memo_more) == 1
    memo = a.memoized()
    got = []
    for d in devices:
        try:
            got.append(memo(d))
        except CelRuntimeError as exc:
            got.append(("error", type(exc).__name__, exc.message))
    assert got == _matches_all(a, devices)
    assert len(memo.cache) == 3  # type: ignore[attr-defined]  # gpu, mig, and no type at all
    # A full key set is replaced: devices classify again, results stay right.
    monkeypatch.setattr(compiler, "_KEYSET_MAX", 0)
    for s in (a, c):
        assert _plain(s.sweep(devices, memoize=True)) == _matches_all(s, devices)


def test_memoized_error_does_not_grow_its_traceback() -> None:
    memo = compile_selector("device.attributes['gpu.nvidia.com'].nope == 1").memoized()
    depths = []
    for _ in range(3):
        with pytest.raises(CelRuntimeError) as info:
            memo(GPU)
        tb, n = info.value.__traceback__, 0
        while tb is not None:
            tb, n = tb.tb_next, n + 1
        depths.append(n)
    assert depths[0] == depths[1] == depths[2]
