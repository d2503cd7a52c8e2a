"""``dradiag version``: the tool's version (and Python's), as text or JSON."""

from __future__ import annotations

import platform

import typer

from dradiag.cli.entry import version_line
from dradiag.cli.options import Output, OutputFormat


def version(output: Output = OutputFormat.TEXT) -> int:
    """Print dradiag's version (also: dradiag --version).

    \b
    Examples:
      dradiag version
      dradiag version -o json
    """
    from dradiag import __version__

    if output is OutputFormat.TEXT:
        typer.echo(version_line())
    else:
        from dradiag.render.document import dump_document

        doc = {"name": "dradiag", "version": __version__, "python": platform.python_version()}
        typer.echo(dump_document(doc, output), nl=False)
    return 0


def register(app: typer.Typer) -> None:
    """Add the command to ``app``."""
    app.command("version")(version)
