"""The two CEL error types: compile errors (with a source position) and runtime errors.

    CelError
     ├── CelCompileError   parse or check failure; position, caret rendering
     └── CelRuntimeError   an evaluation error (no such key, no such overload, overflow,
                           cost limit, non-bool result); in kube-scheduler this aborts the
                           scheduling attempt rather than filtering the device out
                           (k8s-dra-semantics.md §1.7)

Messages follow cel-go's wording ("found no matching overload for ...", "no such key: x")
so that a user can match them with what the scheduler printed.
"""

from __future__ import annotations

__all__ = ["CelError", "CelCompileError", "CelRuntimeError"]


class CelError(Exception):
    """Base of every error raised by the CEL engine."""


def _line_col(expression: str, position: int) -> tuple[int, int]:
    """Return the 1-based (line, column) of a 0-based character offset."""
    position = max(0, min(position, len(expression)))
    line = expression.count("\n", 0, position) + 1
    start = expression.rfind("\n", 0, position) + 1
    return line, position - start + 1


class CelCompileError(CelError):
    """A parse or type-check error.

    ``position`` is a 0-based character offset into ``expression`` (None when the error
    concerns the whole expression, e.g. its length); ``line`` and ``column`` are 1-based,
    as in cel-go's ``ERROR: <input>:1:18: ...``.
    """

    def __init__(self, expression: str, position: int | None, reason: str) -> None:
        self.expression = expression
        self.position = position
        self.reason = reason
        if position is None:
            self.line: int | None = None
            self.column: int | None = None
        else:
            self.line, self.column = _line_col(expression, position)
        super().__init__(str(self))

    def __str__(self) -> str:
        if self.line is None:
            # cel-go's NoLocation (line -1, 0-based column -1 shown as 0).
            return f"ERROR: <input>:-1:0: {self.reason}"
        return f"ERROR: <input>:{self.line}:{self.column}: {self.reason}"

    def render_caret(self) -> str:
        """Return the offending source line, a caret under the position, and the reason.

        ``"expression\\n   ^\\nreason"``, the form ``dradiag selector-check`` prints.
        """
        if self.position is None or self.line is None or self.column is None:
            return f"{self.expression}\n{self.reason}"
        source_line = self.expression.split("\n")[self.line - 1]
        # Tabs keep their width so the caret lines up in a terminal.
        pad = "".join("\t" if ch == "\t" else " " for ch in source_line[: self.column - 1])
        return f"{source_line}\n{pad}^\n{self.reason}"


class CelRuntimeError(CelError):
    """An evaluation error; ``message`` is cel-go's text, e.g. ``no such key: uuid``."""

    def __init__(self, message: str) -> None:
        self.message = message
        super().__init__(message)

    def __str__(self) -> str:
        return self.message


class CostLimitExceeded(CelRuntimeError):
    """The runtime cost of one evaluation passed the limit (1,000,000 in Kubernetes)."""

    def __init__(self) -> None:
        super().__init__("operation cancelled: actual cost limit exceeded")
