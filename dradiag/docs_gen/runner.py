"""Run a documented ``dradiag`` command on the samples, in process, as a reader would type it.

The docs' examples use ``--from samples/<name>``: the folders ``dradiag demo --extract
samples`` writes. :class:`SampleWorkspace` makes exactly that folder in a temporary
directory and runs each command there, with plain output (``NO_COLOR``, not a
terminal), so the text is what a reader sees piped and the same on every machine.

A documented line is shell: ``dradiag scan --from samples/x -o json | head -20  # exit 1``.
:func:`parse_line` keeps what dradiag runs (up to the first pipe or redirection), a
``| head -N`` (applied to the output) and the ``# exit N`` comment (the documented exit
status; 0 when absent).
"""

from __future__ import annotations

import contextlib
import io
import os
import re
import shlex
import tempfile
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

SAMPLES_DIR = "samples"
"""Where the docs' examples expect the extracted samples, relative to the working directory."""

PROGS = {"dradiag": 1, "kubectl": 2, "kubectl_complete-dra_diag": 1}
"""How many words name the program: ``dradiag ...``, ``kubectl dra-diag ...``, and the
completion executable kubectl calls for the plugin."""
COMPLETER = "kubectl_complete-dra_diag"

_EXIT = re.compile(r"#\s*exit\s+(\d+)\s*$")
_SHELL_STOP = {"|", ">", ">>", "2>", "2>&1", "&&", "||", ";", "<"}
_HEAD = re.compile(r"^head\s+-(?:n\s*)?(\d+)$")
_ENV = {"NO_COLOR": "1", "COLUMNS": "100", "TERM": "dumb"}


@dataclass(frozen=True, slots=True)
class CommandLine:
    """One documented command line, split."""

    text: str
    """The line as documented, without the ``# exit`` comment."""
    prog: str
    """``dradiag`` or ``kubectl dra-diag``."""
    args: tuple[str, ...]
    """The arguments dradiag receives."""
    exit: int
    """The documented exit status."""
    head: int | None
    """``| head -N``: keep the first N lines of the output."""


@dataclass(frozen=True, slots=True)
class Ran:
    """What one run printed, and its exit status."""

    code: int
    stdout: str
    stderr: str


def parse_line(line: str) -> CommandLine:
    """Split a documented ``dradiag ...`` line (without its ``$ `` prompt)."""
    line = line.strip()
    documented_exit = 0
    match = _EXIT.search(line)
    if match:
        documented_exit = int(match.group(1))
        line = line[: match.start()].rstrip()
    words = shlex.split(line, comments=True)
    if not words or words[0] not in PROGS or (words[0] == "kubectl" and words[1:2] != ["dra-diag"]):
        raise ValueError(f"not a dradiag command: {line!r}")
    skip = PROGS[words[0]]
    prog = " ".join(words[:skip])
    args: list[str] = []
    rest: list[str] = []
    for i, word in enumerate(words[skip:], skip):
        if word in _SHELL_STOP:
            rest = words[i:]
            break
        args.append(word)
    head = None
    if rest[:1] == ["|"]:
        m = _HEAD.match(" ".join(rest[1:]))
        head = int(m.group(1)) if m else None
    return CommandLine(text=line, prog=prog, args=tuple(args), exit=documented_exit, head=head)


@contextlib.contextmanager
def _environment(values: Mapping[str, str], workdir: Path) -> Iterator[None]:
    saved = {k: os.environ.get(k) for k in values}
    cwd = os.getcwd()
    os.environ.update(values)
    os.chdir(workdir)
    try:
        yield
    finally:
        os.chdir(cwd)
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


class SampleWorkspace:
    """A temporary working directory holding ``samples/<name>/`` for every shipped sample."""

    def __init__(self) -> None:
        from dradiag.cli.commands.demo import extract, list_samples

        self._tmp = tempfile.TemporaryDirectory(prefix="dradiag-docs-")
        self.path = Path(self._tmp.name)
        extract(list_samples(), self.path / SAMPLES_DIR)

    def __enter__(self) -> SampleWorkspace:
        return self

    def __exit__(self, *exc: object) -> None:
        self._tmp.cleanup()

    def run(self, command: CommandLine) -> Ran:
        """Run ``command`` here, in process, and return what it printed (head applied)."""
        from dradiag.cli.app import run

        out, err = io.StringIO(), io.StringIO()
        with (
            _environment(_ENV, self.path),
            contextlib.redirect_stdout(out),
            contextlib.redirect_stderr(err),
        ):
            if command.prog == COMPLETER:
                from dradiag.cli.completion import kubectl_complete

                code = kubectl_complete(list(command.args))
            else:
                code = run(list(command.args), prog=command.prog)
        stdout = out.getvalue()
        if command.head is not None:
            stdout = "".join(stdout.splitlines(keepends=True)[: command.head])
        return Ran(code=code, stdout=self._portable(stdout), stderr=self._portable(err.getvalue()))

    def _portable(self, text: str) -> str:
        """Machine paths out: the workspace reads as ``.``, the package's samples generically."""
        from dradiag.cli.commands.demo import samples_root

        text = text.replace(str(samples_root()), ".../site-packages/dradiag/samples")
        return text.replace(str(self.path) + os.sep, "").replace(str(self.path), ".")
