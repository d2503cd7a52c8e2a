"""Parameter values that click already gives in their final form skip typer's pydantic coercion.

Typer 0.29 coerces every parameter, ``None`` included, through a pydantic ``TypeAdapter``
built on first use: importing pydantic and building the adapters cost ~0.1 s of CPU per
run, a third of what ``selector-check --expr`` costs on a small file. dradiag's
parameters are strings, lists of strings, flags and values with a ``parser`` of its own
(``--output``, the timeouts), so :func:`install` gives typer a runtime parameter that
answers those directly: a ``str`` as it is, a ``bool`` flag as it is, a parser's result,
a list of such. Anything else, and any value a parser rejects, goes to typer's own
coercion, so its answers and its error messages are unchanged. Typer versions without
this machinery are left alone.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, get_args, get_origin

_FALLBACK = object()
"""A value the fast path does not decide (typer's own coercion does)."""


def _leaf(annotation: Any, info: Any, value: Any) -> Any:
    """``value`` coerced as typer would for ``annotation``, or :data:`_FALLBACK`."""
    parser = getattr(info, "parser", None)
    if parser is not None:
        try:
            return parser(value)
        except Exception:  # typer's adapter turns it into its own message
            return _FALLBACK
    if annotation is str and value.__class__ is str:
        return value
    if annotation is bool and value.__class__ is bool:
        return value
    return _FALLBACK


def _coerced(annotation: Any, info: Any, value: Any) -> Any:
    if get_origin(annotation) is list:
        (inner,) = get_args(annotation) or (Any,)
        items = value if isinstance(value, list | tuple) else [value]
        out = [_leaf(inner, info, item) for item in items]
        return _FALLBACK if any(item is _FALLBACK for item in out) else out
    return _leaf(annotation, info, value)


def install() -> None:
    """Route typer's runtime coercion through the fast path (once; a no-op elsewhere)."""
    try:
        from typer import _coercion, core
    except ImportError:  # pragma: no cover - a typer without runtime coercion
        return
    build: Any = getattr(core, "build_runtime_param", None)
    base: Any = getattr(_coercion, "RuntimeParam", None)
    if build is None or base is None or getattr(build, "_dradiag_plain", False):
        return

    @dataclass(frozen=True)
    class _PlainRuntimeParam(base):  # type: ignore[misc,valid-type]
        descriptor: Any = None
        full: list[Any] = field(default_factory=list)

        def _coerce_value(self, value: Any, param: Any, ctx: Any) -> Any:
            result = _coerced(self.annotation, self.parameter_info, value)
            if result is not _FALLBACK:
                return result
            if not self.full:
                self.full.append(build(self.descriptor))
            return self.full[0]._coerce_value(value, param=param, ctx=ctx)

    def build_plain(descriptor: Any) -> Any:
        if getattr(descriptor, "file_annotation", None) is not None:
            return build(descriptor)
        return _PlainRuntimeParam(
            annotation=descriptor.annotation,
            parameter_info=descriptor.parameter_info,
            descriptor=descriptor,
        )

    build_plain._dradiag_plain = True  # type: ignore[attr-defined]
    core.build_runtime_param = build_plain
