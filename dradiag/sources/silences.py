"""Reading a silence file: the scan findings a team has looked at and accepted.

The file is YAML, a list of entries (or ``silences:`` holding one), each naming a rule
id (glob), an optional scope and a required reason, so an accepted problem stays
explained where the next reader finds it::

    silences:
      - rule: DRA-PUB-NO-SLICES
        node: cpu-*
        reason: CPU-only nodes run no GPU driver
      - rule: DRA-ALLOC-*
        namespace: sandbox
        claim: scratch-*
        reason: best-effort claims, allowed to wait

A malformed file is an input error (exit 2) naming the file and the entry: a silence
that silently silenced nothing, or everything, would be worse than none.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from dradiag.errors import InputError

DEFAULT_SILENCE_FILE = ".dradiag-silence.yaml"
"""Read from the working directory when ``--silence`` is not given and it exists."""

_KEYS = {"rule", "reason", "namespace", "claim", "node"}


def load_silences(path: str) -> tuple[dict[str, str], ...]:
    """The entries of the silence file at ``path``, checked (``rule`` and ``reason``
    present, no unknown key, string values); InputError when it is not one.

    Plain mappings, not ``diagnosis.scan_scope.Silence``: sources sit below the
    diagnosis layer; the command builds the Silences.
    """
    import yaml

    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise InputError(f"cannot read the silence file: {exc.strerror}", path=path) from None
    try:
        data: Any = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        raise InputError(
            f"not YAML: {getattr(exc, 'problem', None) or exc}",
            path=path,
            line=mark.line + 1 if mark is not None else None,
        ) from None
    if data is None:
        return ()
    if isinstance(data, dict) and set(data) == {"silences"}:
        data = data["silences"] or []
    if not isinstance(data, list):
        raise InputError("expected a list of silences (or 'silences:' holding one)", path=path)
    out: list[dict[str, str]] = []
    for index, entry in enumerate(data):
        where = f"silences[{index}]"
        if not isinstance(entry, dict):
            raise InputError(f"{where}: expected a mapping with rule and reason", path=path)
        unknown = sorted(set(map(str, entry)) - _KEYS)
        if unknown:
            raise InputError(
                f"{where}: unknown key {unknown[0]!r} (keys: {', '.join(sorted(_KEYS))})",
                path=path,
            )
        values: dict[str, str] = {}
        for key in _KEYS:
            value = entry.get(key)
            if value is None:
                continue
            if not isinstance(value, str | int | float) or isinstance(value, bool):
                raise InputError(f"{where}.{key}: expected a string", path=path)
            values[key] = str(value).strip()
        for required in ("rule", "reason"):
            if not values.get(required):
                raise InputError(f"{where}: {required!r} is required", path=path)
        out.append(values)
    return tuple(out)
