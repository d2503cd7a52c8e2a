"""Progress of live collection on stderr: a rich spinner naming what is being read.

stdout carries only the requested document (DESIGN §3), so progress goes to stderr, and
only where a person watches it: never when stderr is not a terminal, never with
``-o json``/``-o yaml`` (machine consumers), never with ``NO_COLOR``/``--no-color``
asking for plain output. rich is imported only when a spinner is actually shown.
"""

from __future__ import annotations

import os
import sys
import threading
from types import TracebackType
from typing import IO, Any


class Progress:
    """A status line; ``update()`` is safe from reader threads; a no-op when disabled."""

    def __init__(self, *, enabled: bool, stream: IO[str] | None = None) -> None:
        self.enabled = enabled
        self._stream = stream
        self._status: Any = None
        self._lock = threading.Lock()
        self.messages: list[str] = []
        """Every message shown, in order (for tests and debugging)."""

    @classmethod
    def for_output(
        cls, *, output: str, no_color: bool = False, stream: IO[str] | None = None
    ) -> Progress:
        """Enabled only for text output to a terminal (see the module docstring)."""
        stream = stream if stream is not None else sys.stderr
        interactive = bool(getattr(stream, "isatty", lambda: False)())
        enabled = (
            interactive
            and output == "text"
            and not no_color
            and "NO_COLOR" not in os.environ
            and os.environ.get("TERM") != "dumb"
        )
        return cls(enabled=enabled, stream=stream)

    def __enter__(self) -> Progress:
        if self.enabled:
            from rich.console import Console

            console = Console(file=self._stream, stderr=self._stream is None)
            self._status = console.status("connecting to the cluster", spinner="dots")
            self._status.start()
        return self

    def update(self, message: str) -> None:
        """Show what is being read now."""
        with self._lock:
            self.messages.append(message)
            if self._status is not None:
                self._status.update(f"reading: {message}")

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._status is not None:
            self._status.stop()
            self._status = None
