"""The common command-line options of DESIGN §3, defined once and shared by every command.

Spelled like kubectl's so users type them by reflex. A command declares the ones it
takes by using these ``Annotated`` aliases as parameter types; :class:`CommonOptions`
carries the values into the command body.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Annotated

import typer


class OutputFormat(StrEnum):
    """``-o/--output`` values; ``sarif`` only where a command documents it."""

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
        metavar="SECONDS",
        min=0.1,
        help="Timeout for each request to the API server.",
    ),
]
Output = Annotated[
    OutputFormat,
    typer.Option(
        "-o",
        "--output",
        case_sensitive=False,
        help="Output format: text, json or yaml.",
    ),
]
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
        metavar="SECONDS",
        min=1.0,
        help="Overall time limit for reading the cluster; reads not done by then are "
        "reported as unknown.",
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
    str,
    typer.Option(
        "--stuck-after",
        metavar="DURATION",
        help="How long a scheduled pod may wait for Prepare (or termination) without any event "
        "before dradiag calls it stuck: 300, 90s, 5m, 1h.",
    ),
]

DEFAULT_REQUEST_TIMEOUT = 10.0
DEFAULT_TIMEOUT = 60.0
DEFAULT_STUCK_AFTER = "5m"


@dataclass(frozen=True, slots=True, kw_only=True)
class CommonOptions:
    """The values of the common options one command received."""

    from_path: str | None = None
    kubeconfig: str | None = None
    context: str | None = None
    namespace: str | None = None
    all_namespaces: bool = False
    request_timeout: float = DEFAULT_REQUEST_TIMEOUT
    output: OutputFormat = OutputFormat.TEXT
    no_color: bool = False
    exit_zero: bool = False
    as_user: str | None = None
    """``--as``: the user to impersonate (live collection only)."""
    as_groups: tuple[str, ...] = ()
    """``--as-group``: groups to impersonate (live collection only)."""
    timeout: float = DEFAULT_TIMEOUT
    """``--timeout``: the overall limit for live collection, in seconds."""
