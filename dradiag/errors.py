"""The DradiagError tree: errors a user can act on, each mapped to one exit code.

    DradiagError                 base; str() is the one line the user sees
    ├── UsageError               bad arguments or flag combinations          (exit 2)
    ├── InputError               unreadable or malformed input; carries path,
    │                            line and column where they are known        (exit 2)
    ├── ClusterUnreachable       the API server could not be reached or timed
    │                            out before any evidence was read            (exit 3)
    └── TargetUnreadable         the object asked about could not be read
                                 (forbidden, timed out): neither found nor
                                 missing, so nothing can be said             (exit 4)

"Broken" (exit 1) and "inconclusive" (exit 4) are results, not exceptions: they come
from the Diagnosis, and only ``cli/app.py`` turns them into exit codes.
"""

from __future__ import annotations


class DradiagError(Exception):
    """Base of every error dradiag reports to a user as one line."""


class UsageError(DradiagError):
    """The command line asks for something impossible (bad NS/NAME, conflicting flags)."""


class InputError(DradiagError):
    """An input file or stream cannot be used.

    The message is prefixed with ``path:line:column`` when they are known, the form
    editors and CI annotators recognise.
    """

    def __init__(
        self,
        reason: str,
        *,
        path: str | None = None,
        line: int | None = None,
        column: int | None = None,
    ) -> None:
        self.reason = reason
        self.path = path
        self.line = line
        self.column = column
        super().__init__(self._format())

    def _format(self) -> str:
        where = ""
        if self.path is not None:
            where = self.path
            if self.line is not None:
                where += f":{self.line}"
                if self.column is not None:
                    where += f":{self.column}"
            where += ": "
        return where + self.reason


class ClusterUnreachable(DradiagError):
    """No evidence could be read from the cluster at all (connection, auth, timeout)."""


class TargetUnreadable(DradiagError):
    """The target itself (``claim NS/NAME``) could not be read: a 403 or a timeout is not
    "not found", and no diagnosis can be drawn without it."""
