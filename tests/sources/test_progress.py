"""Progress on stderr: shown only to a person at a terminal, never into machine output."""

from __future__ import annotations

import io

import pytest

from dradiag.sources.progress import Progress


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


@pytest.fixture(autouse=True)
def _colour_allowed(monkeypatch):
    monkeypatch.delenv("NO_COLOR", raising=False)
    monkeypatch.setenv("TERM", "xterm-256color")


def test_spinner_on_a_terminal_names_what_is_read():
    stream = Terminal()
    progress = Progress.for_output(output="text", stream=stream)
    with progress:
        progress.update("list resourceslices at cluster scope")

    assert progress.enabled
    assert progress.messages == ["list resourceslices at cluster scope"]


@pytest.mark.parametrize(
    "output,stream,no_color,env",
    [
        ("json", Terminal(), False, {}),
        ("yaml", Terminal(), False, {}),
        ("text", io.StringIO(), False, {}),
        ("text", Terminal(), True, {}),
        ("text", Terminal(), False, {"NO_COLOR": "1"}),
    ],
)
def test_silent_for_machines_pipes_and_no_color(output, stream, no_color, env, monkeypatch):
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    progress = Progress.for_output(output=output, no_color=no_color, stream=stream)
    with progress:
        progress.update("get nodes node-a")

    assert not progress.enabled
    assert stream.getvalue() == ""
