"""The common command-line options of DESIGN §3, defined once and shared by every command.

Spelled like kubectl's so users type them by reflex. A command declares the ones it
takes by using these ``Annotated`` aliases as parameter types; :class:`CommonOptions`
carries the values into the command body.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Annotated, Any

import typer

from dradiag.cli.durations import parse_seconds, parse_timeout


class OutputFormat(StrEnum):
    """``-o/--output`` values; each command offers its own subset (:func:`output_option`)."""

    TEXT = "text"
    JSON = "json"
    YAML = "yaml"
    SARIF = "sarif"
    WIDE = "wide"
    """The text table with every column, nothing folded (``scan``, ``inventory``)."""
    NAME = "name"
    """One ``NS/NAME`` line per row, as ``kubectl -o name`` (``scan``)."""


FromPath = Annotated[
    str | None,
    typer.Option(
        "--from",
        metavar="PATH",
        help="Read cluster state offline from a bundle, directory or file of Kubernetes "
        "objects ('-' for stdin) instead of a live cluster.",
    ),
]
Kubeconfig = Annotated[
    str | None,
    typer.Option("--kubeconfig", metavar="FILE", help="Path to the kubeconfig file to use."),
]
Context = Annotated[
    str | None,
    typer.Option("--context", metavar="NAME", help="The kubeconfig context to use."),
]
Namespace = Annotated[
    str | None,
    typer.Option("-n", "--namespace", metavar="NS", help="The namespace scope of this request."),
]
AllNamespaces = Annotated[
    bool,
    typer.Option("-A", "--all-namespaces", help="Look across all namespaces."),
]
RequestTimeout = Annotated[
    float,
    typer.Option(
        "--request-timeout",
        metavar="DURATION",
        parser=parse_timeout,
        show_default=False,
        help="Timeout for each request to the API server, as kubectl takes it: 1s, 2m, 3h, "
        "a bare integer in seconds, or 0 for none. Default: 10s.",
    ),
]


def one_of(names: Sequence[str]) -> Callable[[object], str]:
    """A ``parser=`` for an option that takes one of ``names`` (any case, spaces
    trimmed); another value gets click's "Invalid value for '--opt': 'x' is not one
    of ..." (exit 2)."""

    def parse(value: object) -> str:
        text = str(value).strip().lower()
        if text not in names:
            raise ValueError(f"{value!r} is not one of {', '.join(map(repr, names))}.")
        return text

    return parse


def output_option(*formats: OutputFormat) -> Any:
    """The ``-o/--output`` option of a command that writes exactly ``formats``, for
    ``Annotated[OutputFormat, output_option(...)]``.

    Each command offers only what it can write (``claim``: text, json, yaml; ``scan``:
    also sarif), its help lists exactly those, and any other value is click's usual
    "Invalid value for '-o'" (exit 2) before the command runs. The values are
    :class:`OutputFormat` members, so a command tests ``output is OutputFormat.JSON``.
    """
    names = [f.value for f in formats]
    name = one_of(names)

    def parse(value: object) -> OutputFormat:
        if isinstance(value, OutputFormat) and value in formats:
            return value
        return OutputFormat(name(value))

    def complete(incomplete: str) -> list[str]:
        return [n for n in names if n.startswith(incomplete)]

    listed = ", ".join(names[:-1]) + f" or {names[-1]}" if len(names) > 1 else names[0]
    return typer.Option(
        "-o",
        "--output",
        metavar="|".join(names),
        parser=parse,
        autocompletion=complete,
        help=f"Output format: {listed}.",
    )


Output = Annotated[
    OutputFormat, output_option(OutputFormat.TEXT, OutputFormat.JSON, OutputFormat.YAML)
]
"""``-o`` for the commands that write text, json or yaml (DESIGN §3)."""
NoColor = Annotated[
    bool,
    typer.Option(
        "--no-color", help="Disable colour (also off when NO_COLOR is set or stdout is not a TTY)."
    ),
]
ExitZero = Annotated[
    bool,
    typer.Option(
        "--exit-zero", help="Exit 0 whatever was found (errors in use still exit non-zero)."
    ),
]

As = Annotated[
    str | None,
    typer.Option(
        "--as",
        metavar="USER",
        help="Username to impersonate for the operation (like kubectl --as).",
    ),
]
AsGroup = Annotated[
    list[str] | None,
    typer.Option(
        "--as-group",
        metavar="GROUP",
        help="Group to impersonate for the operation; repeat for several (like kubectl --as-group).",
    ),
]
Timeout = Annotated[
    float,
    typer.Option(
        "--timeout",
        metavar="DURATION",
        parser=parse_timeout,
        show_default=False,
        help="Overall time limit for reading the cluster (1s, 2m, 3h, seconds, 0 for none); "
        "reads not done by then are reported as unknown. Default: 60s.",
    ),
]

Now = Annotated[
    str | None,
    typer.Option(
        "--now",
        metavar="TIME",
        help="Judge ages against this RFC 3339 time instead of the snapshot's collection time "
        "(or, without one, its newest timestamp).",
    ),
]
StuckAfter = Annotated[
    float,
    typer.Option(
        "--stuck-after",
        metavar="DURATION",
        show_default=False,
        parser=lambda value: (
            float(value) if isinstance(value, int | float) else parse_seconds(str(value))
        ),
        help="How long a scheduled pod may wait for Prepare (or termination) without any event "
        "before dradiag calls it stuck: 300, 90s, 5m, 1h30m. Default: 5m.",
    ),
]

DEFAULT_REQUEST_TIMEOUT = 10.0
DEFAULT_TIMEOUT = 60.0
DEFAULT_STUCK_AFTER = 300.0
"""Five minutes, in seconds."""


@dataclass(frozen=True, slots=True, kw_only=True)
class CommonOptions:
    """The values of the common options one command received."""

    from_path: str | None = None
    kubeconfig: str | None = None
    context: str | None = None
    namespace: str | None = None
    all_namespaces: bool = False
    request_timeout: float = DEFAULT_REQUEST_TIMEOUT
    """``--request-timeout`` in seconds; ``inf`` for ``0`` (no timeout, as in kubectl)."""
    output: OutputFormat = OutputFormat.TEXT
    no_color: bool = False
    exit_zero: bool = False
    as_user: str | None = None
    """``--as``: the user to impersonate (live collection only)."""
    as_groups: tuple[str, ...] = ()
    """``--as-group``: groups to impersonate (live collection only)."""
    timeout: float = DEFAULT_TIMEOUT
    """``--timeout``: the overall limit for live collection, in seconds (``inf``: none)."""
