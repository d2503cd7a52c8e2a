"""The Typer application, ``main()``, and the single place exceptions become exit codes.

Command modules are imported here for registration only; each imports its pipeline
stage inside the command body, so ``dradiag --help`` loads neither the kubernetes client
nor the CEL engine (STYLE "Start-up time").
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Sequence
from typing import Annotated, Any

import typer

from dradiag.cli import coercion, invocation
from dradiag.cli.exit_codes import ExitCode
from dradiag.errors import ClusterUnreachable, DradiagError, TargetUnreadable

coercion.install()  # no pydantic for plain values (cli.coercion)

app = typer.Typer(
    name="dradiag",
    help="Diagnose NVIDIA GPU allocation through Kubernetes Dynamic Resource Allocation: "
    "name the first broken phase of a ResourceClaim's life, with evidence and the next step. "
    "Read-only: dradiag never changes the cluster or the node.",
    # Typer's pretty tracebacks show locals, which can hold a kubeconfig bearer token.
    pretty_exceptions_enable=False,
    no_args_is_help=True,
    # Plain click help, as kubectl's: no boxes, no fixed width, the same on a pipe.
    rich_markup_mode=None,
    add_completion=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)

GLOBAL_FLAGS = {"-v": "verbose", "--verbose": "verbose", "--debug": "debug"}
"""Flags taken anywhere on the line, as kubectl takes its global flags."""


def _print_version(value: bool) -> None:
    if value:
        from dradiag.cli.entry import version_line

        typer.echo(version_line())
        raise typer.Exit(0)


@app.callback()
def _root(
    version: Annotated[
        bool,
        typer.Option(
            "--version", is_eager=True, callback=_print_version, help="Print the version and exit."
        ),
    ] = False,
    verbose: Annotated[
        bool,
        typer.Option(
            "-v", "--verbose", help="Say on stderr what is read and decided (info messages)."
        ),
    ] = False,
    debug: Annotated[
        bool,
        typer.Option(
            "--debug", help="Debug messages on stderr, and a traceback on an internal error."
        ),
    ] = False,
) -> None:
    """Diagnose NVIDIA GPU allocation through Kubernetes DRA (read-only).

    The global flags are also accepted after the command; ``run`` takes them out of the
    line before parsing, so these parameters only document them.
    """


def _register_commands() -> None:
    """Register every module of ``dradiag.cli.commands`` (each defines ``register(app)``).

    Discovery keeps adding a command to adding one file; the modules import only typer
    and ``cli.options`` at module level, so this stays cheap.
    """
    import importlib
    import pkgutil

    from dradiag.cli import commands

    for info in sorted(pkgutil.iter_modules(commands.__path__), key=lambda m: m.name):
        module = importlib.import_module(f"{commands.__name__}.{info.name}")
        module.register(app)


_register_commands()


def _plain_argument_help() -> None:
    """Arguments in help as click and kubectl print them: ``NS/NAME`` in the usage line
    (typer 0.29 writes ``{NS/NAME}``) and no ``<str>``/``<list[str]>`` after a metavar
    that already says what goes there, as options already have it.

    typer offers no hook for an argument's help record, so its two methods are wrapped
    here, once; without them (another typer) help stays typer's own.
    """
    from typer import core

    argument: Any = getattr(core, "TyperArgument", None)
    if argument is None or not hasattr(argument, "_usage_display_name"):
        return
    if getattr(argument, "_dradiag_plain", False):
        return
    typed = argument.display_type_rich

    def display_type_rich(self: Any, ctx: Any) -> str | None:
        return None if self.metavar is not None else typed(self, ctx)  # type: ignore[no-any-return]

    def usage_display_name(self: Any) -> str:
        name = str(self.display_name_raw)
        if self.nargs != 1 and not name.endswith("..."):
            name += "..."
        return name if self.required else f"[{name}]"

    argument.display_type_rich = display_type_rich
    argument._usage_display_name = usage_display_name
    argument._dradiag_plain = True


_plain_argument_help()


class _CurrentStderrHandler(logging.StreamHandler):  # type: ignore[type-arg]
    """Writes to whatever ``sys.stderr`` is now, not the stream of the first run.

    ``run()`` may be called many times in one process (tests, the demo); a handler
    holding the first ``sys.stderr`` would write to a closed stream later.
    """

    def __init__(self) -> None:
        super().__init__(sys.stderr)

    @property  # type: ignore[override]
    def stream(self) -> object:
        return sys.stderr

    @stream.setter
    def stream(self, _value: object) -> None:
        pass


class _StderrFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        level = "warning" if record.levelno == logging.WARNING else record.levelname.lower()
        return f"{invocation.prog()}: {level}: {record.getMessage()}"


def _configure_logging(level: int) -> None:
    handler = _CurrentStderrHandler()
    handler.setFormatter(_StderrFormatter())
    root = logging.getLogger("dradiag")
    root.handlers[:] = [handler]
    root.setLevel(level)
    root.propagate = False


def _error(message: str) -> None:
    sys.stderr.write(f"{invocation.prog()}: error: {message}\n")


def split_global_flags(args: Sequence[str]) -> tuple[list[str], set[str]]:
    """``args`` without ``-v``/``--verbose``/``--debug`` (before a ``--``), and which were
    given: kubectl users put global flags after the command by habit."""
    rest: list[str] = []
    flags: set[str] = set()
    for i, arg in enumerate(args):
        if arg == "--":
            rest.extend(args[i:])
            break
        if arg in GLOBAL_FLAGS:
            flags.add(GLOBAL_FLAGS[arg])
        else:
            rest.append(arg)
    return rest, flags


def _is_group(ctx: object) -> bool:
    # typer vendors click (typer._click); its Group is typer's base for command groups.
    return hasattr(getattr(ctx, "command", None), "list_commands")


def run(argv: Sequence[str] | None = None, *, prog: str | None = None) -> int:
    """Run the CLI and return the exit code (``main`` exits with it).

    ``prog``: the name to show in messages; by default the one the executable was run as
    (``kubectl dra-diag`` for the kubectl plugin).
    """
    invocation.set_prog(prog or invocation.prog_for(sys.argv[0] if sys.argv else None))
    args, flags = split_global_flags(list(sys.argv[1:] if argv is None else argv))
    debug = "debug" in flags or bool(os.environ.get("DRADIAG_DEBUG"))
    level = logging.DEBUG if debug else logging.INFO if "verbose" in flags else logging.WARNING
    from dradiag.cli.completion import COMPLETE_VAR

    if os.environ.get(COMPLETE_VAR):
        level = logging.CRITICAL + 1  # a TAB press must not print warnings into the prompt
    _configure_logging(level)
    try:
        if os.environ.get(COMPLETE_VAR):
            from typer.completion import completion_init

            completion_init()  # typer's bash/zsh/fish classes, registered with click
        result = app(
            args=args,
            prog_name=invocation.prog(),
            standalone_mode=False,
            complete_var=COMPLETE_VAR,
        )
    except SystemExit as exc:
        # Shell completion (_DRADIAG_COMPLETE set) answers and exits inside click.
        return exc.code if isinstance(exc.code, int) else ExitCode.OK
    except typer.Exit as exc:
        return int(getattr(exc, "exit_code", 0))
    except typer.Abort:
        _error("aborted")
        return 130
    except typer.TyperException as exc:
        # Click's usage errors (typer vendors click): one line, and where to read more.
        ctx = getattr(exc, "ctx", None)
        missing_command = type(exc).__name__ == "NoArgsIsHelpError" or (
            _is_group(ctx) and "Missing command" in str(exc)
        )
        if missing_command and ctx is not None:
            # `dradiag`, `dradiag rules`, `dradiag -v`: the help is the answer, not an error.
            sys.stdout.write(ctx.get_help() + "\n")
            return ExitCode.OK
        format_message = getattr(exc, "format_message", None)
        message = format_message() if callable(format_message) else str(exc)
        # Typer validates through pydantic, which prefixes a parser's ValueError with
        # "Value error, "; click's own wording is "Invalid value for '-o': <reason>".
        message = message.replace(": Value error, ", ": ")
        hint = f" (see '{ctx.command_path} --help')" if ctx is not None else ""
        _error(message + hint)
        return ExitCode.USAGE
    except ClusterUnreachable as exc:
        _error(str(exc))
        return ExitCode.RUNTIME
    except TargetUnreadable as exc:
        _error(str(exc))
        return ExitCode.INCONCLUSIVE
    except DradiagError as exc:
        _error(str(exc))
        return ExitCode.USAGE
    except BrokenPipeError:
        # `dradiag scan -o json | head`: the reader left; not an error worth a traceback.
        try:
            sys.stdout = open(os.devnull, "w")  # noqa: SIM115 - silence the flush at exit
        except OSError:
            pass
        return ExitCode.OK
    except KeyboardInterrupt:
        _error("interrupted")
        return 130
    except Exception as exc:  # noqa: BLE001 - the one catch-all, by design
        if debug:
            import traceback

            traceback.print_exc(file=sys.stderr)
        _error(
            f"internal error: {type(exc).__name__}: {exc}"
            + ("" if debug else "; rerun with --debug for a traceback")
        )
        return ExitCode.RUNTIME
    return int(result) if isinstance(result, int) else ExitCode.OK


def main() -> None:
    """Console-script entry point for ``dradiag`` and ``kubectl-dra_diag``.

    Exits without the interpreter's teardown: freeing a large snapshot object by object
    costs about a second on a 100,000-claim input, for nothing. Exit handlers still run
    (the kubernetes client removes the temporary credential files it wrote), and the
    output streams are flushed first.
    """
    import atexit

    from dradiag.cli import inputs

    inputs.KEEP_ALIVE = []
    code = run()
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            # A closed pipe (`dradiag ... | head`) or stream: nothing left to deliver.
            pass
    os._exit(code)
