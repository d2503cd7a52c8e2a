"""CEL selector throughput: dradiag vs cel-python 0.5 vs cel-expr-python (CEL-C++) on the same devices.

Usage: python bench/cel_throughput.py [--devices 100000] [--celpy-sample 2000]

Devices: synthetic NVIDIA devices (15 attributes, 3 capacities; 10 % with another driver
whose attributes are fully qualified under gpu.nvidia.com so every expression evaluates
without error; 40 % MIG). Each engine compiles once and evaluates every prebuilt
activation; the activation build is timed separately. Memoization is off except in the
last table. cel-python is slow, so it runs on a sample and is reported per second.

dradiag is timed three ways: ``sweep`` (the batch API: one generated loop over all devices,
one result per device; the headline figure and the one the ratios use), ``select`` (batch,
matched indexes and errors by index) and ``matches`` called once per device. The memoized
table uses a fleet of 4 GPU models with one driver version: ``sweep(memoize=True)`` warm
(devices already classified, results cached: later sweeps) and cold (first sweep: each
device classified, each distinct tuple evaluated once), and the per-device ``memoized()``
(on devices already classified, with its own result cache).

cel-expr-python without protobuf (not installed here) cannot hold custom types, so
quantities and versions reach it as tagged strings ("Q:<nanos>", "S:<version>") handled by
Python callbacks, the same callback-per-call cost the protobuf workaround has
(cel-engines.md §2.2).
"""

from __future__ import annotations

import argparse
import random
import time
from collections.abc import Callable
from typing import Any

from dradiag.analyses.cel import Quantity, Semver, cel_device, compile_selector, parse_quantity
from dradiag.analyses.cel.semver import parse_semver

EXPRESSIONS = {
    "E1": "device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == 'mig'",
    "E2": "device.capacity['gpu.nvidia.com'].memory.compareTo(quantity('40Gi')) >= 0",
    "E3": "device.attributes['gpu.nvidia.com'].driverVersion.isGreaterThan(semver('550.0.0')) && "
    "device.attributes['gpu.nvidia.com'].productName.lowerAscii().matches('h100')",
}

MODELS = [
    ("NVIDIA A100-SXM4-40GB", "Ampere", "8.0.0", "40Gi", 108),
    ("NVIDIA A100-SXM4-80GB", "Ampere", "8.0.0", "80Gi", 108),
    ("NVIDIA H100 80GB HBM3", "Hopper", "9.0.0", "80Gi", 132),
    ("NVIDIA L4", "Ada Lovelace", "8.9.0", "24Gi", 58),
]
DRIVERS = ["535.161.8", "550.54.15", "560.35.3", "580.65.6"]


def make_devices(
    n: int, seed: int = 7, models: int = 4, vary_driver: bool = True
) -> list[tuple[str, dict[str, Any]]]:
    rng = random.Random(seed)
    out = []
    for i in range(n):
        name, arch, cc, mem, sms = MODELS[rng.randrange(models)]
        mig = rng.random() < 0.4
        other_driver = rng.random() < 0.1
        driver = "other.example.com" if other_driver else "gpu.nvidia.com"
        prefix = "gpu.nvidia.com/" if other_driver else ""
        drv = rng.choice(DRIVERS) if vary_driver else DRIVERS[-1]
        attrs = {
            "type": {"string": "mig" if mig else "gpu"},
            "uuid": {"string": f"GPU-{rng.getrandbits(64):016x}-{i}"},
            "productName": {"string": name},
            "brand": {"string": "Nvidia"},
            "architecture": {"string": arch},
            "cudaComputeCapability": {"version": cc},
            "driverVersion": {"version": drv},
            "cudaDriverVersion": {"version": "12.4.0"},
            "addressingMode": {"string": "HMM"},
            "profile": {"string": "1g.10gb" if mig else "full"},
            "parentUUID": {"string": f"GPU-parent-{i // 7}"},
            "index": {"int": i % 8},
            "minor": {"int": i % 8},
        }
        attrs = {prefix + k: v for k, v in attrs.items()}
        attrs["resource.kubernetes.io/pciBusID"] = {"string": f"0000:{i % 256:02x}:00.0"}
        attrs["resource.kubernetes.io/pcieRoot"] = {"string": f"pci0000:{i % 16:02x}"}
        capacity = {
            prefix + "memory": {"value": "10Gi" if mig else mem},
            prefix + "multiprocessors": {"value": str(14 if mig else sms)},
            prefix + "copyEngines": {"value": "1" if mig else "7"},
        }
        out.append((driver, {"name": f"gpu-{i}", "attributes": attrs, "capacity": capacity}))
    return out


def timed(fn: Callable[[], Any], repeat: int = 5) -> tuple[float, Any]:
    """Best of ``repeat`` runs (the same rule for every engine; the VM is noisy)."""
    times, result = [], None
    for _ in range(repeat):
        t0 = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - t0)
    return min(times), result


# --------------------------------------------------------------------------------------
def bench_dradiag(raw: list[tuple[str, dict[str, Any]]]) -> dict[str, Any]:
    t0 = time.perf_counter()
    devices = [cel_device(driver, d) for driver, d in raw]
    activation_s = time.perf_counter() - t0
    out: dict[str, Any] = {"activation_us": activation_s / len(raw) * 1e6}
    for key, expr in EXPRESSIONS.items():
        t0 = time.perf_counter()
        from dradiag.analyses.cel.compiler import _compile_selector_cached

        _compile_selector_cached.cache_clear()
        sel = compile_selector(expr)
        compile_ms = (time.perf_counter() - t0) * 1e3
        fn = sel.matches

        def run(fn: Callable[[Any], bool] = fn) -> int:
            n = 0
            for d in devices:
                if fn(d):
                    n += 1
            return n

        seconds, matched = timed(run, repeat=5)
        sweep_s, swept = timed(lambda sel=sel: sel.sweep(devices), repeat=5)
        select_s, (indexes, errors) = timed(lambda sel=sel: sel.select(devices), repeat=5)
        assert swept.count(True) == len(indexes) == matched and not errors, key
        out[key] = {
            "rate": len(devices) / sweep_s,
            "select_rate": len(devices) / select_s,
            "matches_rate": len(devices) / seconds,
            "matched": matched,
            "compile_ms": compile_ms,
        }
    return out


# --------------------------------------------------------------------------------------
def _tag_q(q: Quantity) -> str:
    return f"Q:{q.nanos}"


def _tag_s(v: Semver) -> str:
    return f"S:{v}"


def _untag(s: str) -> Quantity | Semver:
    if s.startswith("Q:"):
        return Quantity(int(s[2:]))
    return parse_semver(s[2:])


def bench_cel_expr_python(raw: list[tuple[str, dict[str, Any]]]) -> dict[str, Any]:
    from cel_expr_python import cel
    from cel_expr_python.ext import ext_strings

    def quantity(s: str) -> str:
        return _tag_q(parse_quantity(s))

    def semver(s: str) -> str:
        return _tag_s(parse_semver(s))

    def compare_to(a: str, b: str) -> int:
        x, y = _untag(a), _untag(b)
        return x.compare(y)  # type: ignore[arg-type]

    def is_greater(a: str, b: str) -> bool:
        return compare_to(a, b) > 0

    S, INT, BOOL = cel.Type.STRING, cel.Type.INT, cel.Type.BOOL
    functions = [
        cel.FunctionDecl("quantity", [cel.Overload("quantity_string", S, [S], impl=quantity)]),
        cel.FunctionDecl("semver", [cel.Overload("semver_string", S, [S], impl=semver)]),
        cel.FunctionDecl(
            "compareTo",
            [cel.Overload("k8s_compareTo", INT, [S, S], is_member=True, impl=compare_to)],
        ),
        cel.FunctionDecl(
            "isGreaterThan",
            [cel.Overload("k8s_isGreaterThan", BOOL, [S, S], is_member=True, impl=is_greater)],
        ),
    ]
    env = cel.NewEnv(
        variables={"device": cel.Type.DYN},
        extensions=[ext_strings.ExtStrings()],
        functions=functions,
    )

    t0 = time.perf_counter()
    activations = []
    for driver, d in raw:
        dev = cel_device(driver, d)
        attrs = {
            dom: {k: (_tag_s(v) if isinstance(v, Semver) else v) for k, v in m.items()}
            for dom, m in dev.attributes.items()
        }
        caps = {dom: {k: _tag_q(v) for k, v in m.items()} for dom, m in dev.capacity.items()}
        activations.append(
            env.Activation(
                {
                    "device": {
                        "driver": driver,
                        "attributes": attrs,
                        "capacity": caps,
                        "allowMultipleAllocations": False,
                    }
                }
            )
        )
    activation_s = time.perf_counter() - t0
    out: dict[str, Any] = {"activation_us": activation_s / len(raw) * 1e6}
    for key, expr in EXPRESSIONS.items():
        t0 = time.perf_counter()
        program = env.compile(expr)
        compile_ms = (time.perf_counter() - t0) * 1e3

        def run(program: Any = program) -> int:
            n = 0
            for act in activations:
                if program.eval(act).value() is True:
                    n += 1
            return n

        seconds, matched = timed(run, repeat=3)
        out[key] = {"rate": len(raw) / seconds, "matched": matched, "compile_ms": compile_ms}
    return out


# --------------------------------------------------------------------------------------
def bench_celpy(raw: list[tuple[str, dict[str, Any]]]) -> dict[str, Any]:
    import celpy
    from celpy import celtypes

    def to_cel(v: Any) -> Any:
        if isinstance(v, bool):
            return celtypes.BoolType(v)
        if isinstance(v, int):
            return celtypes.IntType(v)
        if isinstance(v, str):
            return celtypes.StringType(v)
        if isinstance(v, dict):
            return celtypes.MapType({celtypes.StringType(k): to_cel(x) for k, x in v.items()})
        if isinstance(v, tuple | list):
            return celtypes.ListType([to_cel(x) for x in v])
        return v  # Quantity / Semver flow through as Python objects

    def quantity(s: Any) -> Quantity:
        return parse_quantity(str(s))

    def semver(s: Any) -> Semver:
        return parse_semver(str(s))

    def compare_to(a: Any, b: Any) -> celtypes.IntType:
        return celtypes.IntType(a.compare(b))

    def is_greater(a: Any, b: Any) -> celtypes.BoolType:
        return celtypes.BoolType(a.compare(b) > 0)

    def lower_ascii(s: Any) -> celtypes.StringType:
        return celtypes.StringType(str(s).lower())

    functions = {
        "quantity": quantity,
        "semver": semver,
        "compareTo": compare_to,
        "isGreaterThan": is_greater,
        "lowerAscii": lower_ascii,
    }
    true = celtypes.BoolType(True)
    t0 = time.perf_counter()
    activations = []
    for driver, d in raw:
        dev = cel_device(driver, d)
        activations.append(
            {
                "device": to_cel(
                    {
                        "driver": driver,
                        "attributes": dict(dev.attributes),
                        "capacity": dict(dev.capacity),
                        "allowMultipleAllocations": False,
                    }
                )
            }
        )
    activation_s = time.perf_counter() - t0
    out: dict[str, Any] = {"activation_us": activation_s / len(raw) * 1e6}
    for key, expr in EXPRESSIONS.items():
        env = celpy.Environment()
        t0 = time.perf_counter()
        program = env.program(env.compile(expr), functions=functions)
        compile_ms = (time.perf_counter() - t0) * 1e3

        def run(program: Any = program) -> int:
            n = 0
            for act in activations:
                if program.evaluate(act) == true:
                    n += 1
            return n

        seconds, matched = timed(run, repeat=3)
        out[key] = {"rate": len(raw) / seconds, "matched": matched, "compile_ms": compile_ms}
    return out


# --------------------------------------------------------------------------------------
def bench_memoized(n: int) -> dict[str, dict[str, float]]:
    raw = make_devices(n, seed=11, models=4, vary_driver=False)
    devices = [cel_device(driver, d) for driver, d in raw]
    out: dict[str, dict[str, float]] = {}
    for key, expr in EXPRESSIONS.items():
        sel = compile_selector(expr)
        plain_s, plain = timed(lambda sel=sel: sel.sweep(devices))
        # Cold: no device classified for this selector's read keys, no result cached.
        cold = []
        for _ in range(3):
            for d in devices:
                d.memo_keyset, d.memo_more = None, None
            sel._memo_results = None
            t0 = time.perf_counter()
            sel.sweep(devices, memoize=True)
            cold.append(time.perf_counter() - t0)
        warm_s, warm = timed(lambda sel=sel: sel.sweep(devices, memoize=True))
        assert warm == plain, key
        memo = sel.memoized()
        call_s, called = timed(lambda memo=memo: sum(1 for d in devices if memo(d)))
        assert called == plain.count(True), key
        out[key] = {
            "plain": n / plain_s,
            "warm": n / warm_s,
            "cold": n / min(cold),
            "call": n / call_s,
            "distinct": len(memo.cache),  # type: ignore[attr-defined]
        }
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--devices", type=int, default=100_000)
    parser.add_argument("--celpy-sample", type=int, default=2_000)
    args = parser.parse_args()

    raw = make_devices(args.devices)
    print(
        f"{args.devices:,} synthetic NVIDIA devices (15 attributes, 3 capacities); memoization off"
    )
    dr = bench_dradiag(raw)
    cx = bench_cel_expr_python(raw)
    sample = raw[: args.celpy_sample]
    cp = bench_celpy(sample)
    dr_sample = bench_dradiag(sample)

    print(
        f"activation µs/device: dradiag {dr['activation_us']:.1f}, cel-expr-python {cx['activation_us']:.1f}, "
        f"cel-python {cp['activation_us']:.1f}"
    )
    print("evals/s; ratios are dradiag sweep (batch) ÷ the other engine")
    print(
        f"{'expr':4} {'sweep (batch)':>14} {'select':>11} {'matches/dev':>12} {'cel-expr-py':>12} {'cel-python':>11}"
        f" {'vs cel-expr':>12} {'vs cel-python':>14} {'matches vs':>11}  matched  compile ms"
    )
    for key in EXPRESSIONS:
        d, x, p = dr[key], cx[key], cp[key]
        assert d["matched"] == x["matched"], (
            f"{key}: dradiag {d['matched']} vs cel-expr-python {x['matched']}"
        )
        assert dr_sample[key]["matched"] == p["matched"], (
            f"{key}: dradiag vs cel-python on the sample"
        )
        print(
            f"{key:4} {d['rate']:>14,.0f} {d['select_rate']:>11,.0f} {d['matches_rate']:>12,.0f} {x['rate']:>12,.0f}"
            f" {p['rate']:>11,.0f} {d['rate'] / x['rate']:>11.1f}x {d['rate'] / p['rate']:>13,.0f}x"
            f" {d['matches_rate'] / x['rate']:>10.1f}x  {d['matched']:>7}  {d['compile_ms']:.2f}"
        )
    memo = bench_memoized(args.devices)
    print(f"memoized, {args.devices:,} devices of 4 GPU models (differ in uuid/pciBusID); evals/s")
    print(
        f"{'expr':4} {'plain sweep':>12} {'memo warm':>11} {'memo cold':>11} {'memoized()':>11}"
        f" {'warm vs cel-expr':>17} {'warm vs cel-python':>19}  distinct tuples"
    )
    for key in EXPRESSIONS:
        m = memo[key]
        print(
            f"{key:4} {m['plain']:>12,.0f} {m['warm']:>11,.0f} {m['cold']:>11,.0f} {m['call']:>11,.0f}"
            f" {m['warm'] / cx[key]['rate']:>16.1f}x {m['warm'] / cp[key]['rate']:>18,.0f}x  {int(m['distinct'])}"
        )
    print("memoized(): the per-device function, on devices the sweeps above already classified")


if __name__ == "__main__":
    main()
