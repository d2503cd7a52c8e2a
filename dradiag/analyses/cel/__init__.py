"""dradiag's CEL engine for Kubernetes DRA device selectors (DESIGN.md §7).

Compile once (parse, check, generate Python source), evaluate natively on plain Python
device values, and memoize on the values an expression reads. Pure Python at run time;
google-re2 is imported only when a regular expression is compiled.

    sel = compile_selector("device.attributes['gpu.nvidia.com'].type == 'mig'")
    sel.matches(cel_device("gpu.nvidia.com", slice_device))
    sel.sweep(devices)    # batch: one result per device (True, False or the CelRuntimeError)
    sel.select(devices)   # batch: (matched indexes, [(index, CelRuntimeError), ...])
"""

from __future__ import annotations

from .compiler import (
    Clause,
    CompiledExpression,
    CompiledSelector,
    compile_expression,
    compile_selector,
)
from .environment import CelDevice, cel_device
from .errors import CelCompileError, CelError, CelRuntimeError
from .quantity import Quantity, parse_quantity
from .semver import Semver, parse_semver

__all__ = [
    "compile_selector",
    "CompiledSelector",
    "Clause",
    "CelDevice",
    "cel_device",
    "CelCompileError",
    "CelRuntimeError",
    "CelError",
    "Quantity",
    "parse_quantity",
    "Semver",
    "parse_semver",
    "compile_expression",
    "CompiledExpression",
]
