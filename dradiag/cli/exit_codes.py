"""Process exit codes (DESIGN §3): the one place their numbers are written down."""

from __future__ import annotations

from enum import IntEnum


class ExitCode(IntEnum):
    """What a dradiag run ended with; ``--exit-zero`` turns every result code into OK."""

    OK = 0
    """Nothing broken."""
    BROKEN = 1
    """A broken phase, or a selector that matches nothing / errors."""
    USAGE = 2
    """Bad arguments, or unreadable or malformed input."""
    RUNTIME = 3
    """The tool could not run: API unreachable, timeout before any evidence, internal error."""
    INCONCLUSIVE = 4
    """A required read was forbidden or timed out, so the run will not claim healthy."""


OK, BROKEN, USAGE, RUNTIME, INCONCLUSIVE = (
    ExitCode.OK,
    ExitCode.BROKEN,
    ExitCode.USAGE,
    ExitCode.RUNTIME,
    ExitCode.INCONCLUSIVE,
)
