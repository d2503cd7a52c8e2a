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

import typer

from dradiag.cli.exit_codes import ExitCode
from dradiag.errors import ClusterUnreachable, DradiagError, TargetUnreadable

app = typer.Typer(
    name="dradiag",
    help="Diagnose NVIDIA GPU allocation through Kubernetes Dynamic Resource Allocation: "
    "name the first broken phase of a ResourceClaim's life, with evidence and the next step. "
    "Read-only: dradiag never changes the cluster or the node.",
    # Typer's pretty tracebacks show locals, which can hold a kubeconfig bearer token.
    pretty_exceptions_enable=False,
    no_args_is_help=True,
    add_completion=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)

_PROG = "dradiag"


@app.callback()
def _root() -> None:
    """Diagnose NVIDIA GPU allocation through Kubernetes DRA (read-only)."""


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
        return f"{_PROG}: {level}: {record.getMessage()}"


def _configure_logging() -> None:
    handler = _CurrentStderrHandler()
    handler.setFormatter(_StderrFormatter())
    root = logging.getLogger("dradiag")
    root.handlers[:] = [handler]
    root.setLevel(logging.DEBUG if os.environ.get("DRADIAG_DEBUG") else logging.WARNING)
    root.propagate = False


def _error(message: str) -> None:
    sys.stderr.write(f"{_PROG}: error: {message}\n")


def run(argv: Sequence[str] | None = None) -> int:
    """Run the CLI and return the exit code (``main`` exits with it)."""
    _configure_logging()
    args = list(sys.argv[1:] if argv is None else argv)
    try:
        result = app(args=args, prog_name=_PROG, standalone_mode=False)
    except typer.Exit as exc:
        return int(getattr(exc, "exit_code", 0))
    except typer.Abort:
        _error("aborted")
        return 130
    except typer.TyperException as exc:
        # Click's usage errors (typer vendors click): one line, and where to read more.
        ctx = getattr(exc, "ctx", None)
        if type(exc).__name__ == "NoArgsIsHelpError" and ctx is not None:
            sys.stdout.write(ctx.get_help() + "\n")
            return ExitCode.OK
        format_message = getattr(exc, "format_message", None)
        message = format_message() if callable(format_message) else str(exc)
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
        if os.environ.get("DRADIAG_DEBUG"):
            raise
        _error(
            f"internal error: {type(exc).__name__}: {exc}; rerun with DRADIAG_DEBUG=1 for a traceback"
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
