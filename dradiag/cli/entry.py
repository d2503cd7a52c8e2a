"""The console-script entry point: answers ``version`` / ``--version`` before importing typer.

Importing typer (and the pydantic it pulls in) costs most of a short command's run; a
version check in a script or a CI step should not pay it. Everything else goes to
``dradiag.cli.app.main``.
"""

from __future__ import annotations

import sys

_VERSION_ARGS = (["version"], ["--version"])


def version_line() -> str:
    """``dradiag X.Y.Z (Python A.B.C)``: ``version`` and ``--version`` print the same."""
    import platform

    from dradiag import __version__

    return f"dradiag {__version__} (Python {platform.python_version()})"


def main() -> None:
    """``dradiag`` / ``kubectl-dra_diag``."""
    if sys.argv[1:] in _VERSION_ARGS:
        sys.stdout.write(version_line() + "\n")
        sys.stdout.flush()
        raise SystemExit(0)
    from dradiag.cli.app import main as app_main

    app_main()
