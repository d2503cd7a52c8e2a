"""``dradiag completion bash|zsh|fish``: the shell completion script, as kubectl prints its own."""

from __future__ import annotations

from typing import Annotated

import typer

from dradiag.cli.completion import Shell


def completion(
    shell: Annotated[Shell, typer.Argument(metavar="SHELL", help="bash, zsh or fish.")],
) -> int:
    """Print the shell completion script: commands, flags, claim and pod names from --from.

    \b
    Examples:
      source <(dradiag completion bash)        # this shell; add it to ~/.bashrc to keep it
      dradiag completion fish > ~/.config/fish/completions/dradiag.fish
    """
    from dradiag.cli.completion import script

    typer.echo(script(shell))
    return 0


def register(app: typer.Typer) -> None:
    """Add the command to ``app``."""
    app.command("completion")(completion)
