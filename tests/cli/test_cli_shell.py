"""The shell around the commands: help without a command, --version, global flags, and
messages that name the command as the user typed it (``kubectl dra-diag``)."""

from __future__ import annotations

import logging

import pytest

from dradiag import __version__
from dradiag.cli import app as app_module
from dradiag.cli.app import run, split_global_flags
from dradiag.cli.exit_codes import ExitCode
from dradiag.cli.invocation import prog_for


@pytest.mark.parametrize("argv", [[], ["rules"], ["-v"], ["--debug"]])
def test_a_group_without_a_command_prints_help_and_exits_0(argv, capsys):
    assert run(argv) == ExitCode.OK
    out = capsys.readouterr()
    assert out.out.startswith("Usage: dradiag") and "Commands:" in out.out
    assert out.err == ""


def test_help_is_plain_text_without_boxes(capsys):
    assert run(["claim", "--help"]) == ExitCode.OK
    out = capsys.readouterr().out
    assert "--from PATH" in out
    assert not set(out) & set("╭╮╰╯│─━┃")


def test_version_flag(capsys):
    assert run(["--version"]) == ExitCode.OK
    assert capsys.readouterr().out == run_version_line()


def run_version_line() -> str:
    from dradiag.cli.entry import version_line

    line = version_line()
    assert line.startswith(f"dradiag {__version__} (Python ")
    return line + "\n"


@pytest.mark.parametrize(
    "argv",
    [["claim"], ["claim", "a/b/c"], ["scan", "--bogus"], ["rules", "show"], ["nope"]],
)
def test_usage_errors_exit_2_with_one_line(argv, capsys):
    assert run(argv) == ExitCode.USAGE
    err = capsys.readouterr().err
    assert err.startswith("dradiag: error: ") and err.count("\n") == 1


def test_the_kubectl_plugin_names_itself_as_typed(monkeypatch, capsys):
    monkeypatch.setattr("sys.argv", ["/usr/local/bin/kubectl-dra_diag", "claim"])
    assert run(["claim"]) == ExitCode.USAGE
    err = capsys.readouterr().err
    assert err.startswith("kubectl dra-diag: error: ")
    assert "'kubectl dra-diag claim --help'" in err
    assert run(["rules", "show", "NO-SUCH-THING-AT-ALL-X"]) == ExitCode.USAGE
    assert capsys.readouterr().err.startswith("kubectl dra-diag: error: unknown rule id")
    assert run([]) == ExitCode.OK
    assert capsys.readouterr().out.startswith("Usage: kubectl dra-diag [OPTIONS]")


def test_prog_for():
    assert prog_for("/x/kubectl-dra_diag") == "kubectl dra-diag"
    assert prog_for("kubectl-dra_diag.exe") == "kubectl dra-diag"
    assert prog_for("/usr/bin/dradiag") == "dradiag"
    assert prog_for(None) == "dradiag"


def test_global_flags_are_taken_anywhere_before_a_double_dash():
    rest, flags = split_global_flags(["claim", "a/b", "-v", "--debug", "--", "-v"])
    assert rest == ["claim", "a/b", "--", "-v"]
    assert flags == {"verbose", "debug"}


def test_verbose_and_debug_set_the_log_level(capsys):
    run(["rules", "list", "-v", "--phase", "PUB"])
    assert logging.getLogger("dradiag").level == logging.INFO
    run(["rules", "list", "--phase", "PUB", "--debug"])
    assert logging.getLogger("dradiag").level == logging.DEBUG
    run(["rules", "list", "--phase", "PUB"])
    assert logging.getLogger("dradiag").level == logging.WARNING
    logging.getLogger("dradiag.test").info("hidden at the default level")
    assert "hidden" not in capsys.readouterr().err


def _explode(*_args, **_kwargs):
    raise RuntimeError("boom")


def test_internal_error_is_one_line_and_debug_adds_the_traceback(monkeypatch, capsys):
    monkeypatch.delenv("DRADIAG_DEBUG", raising=False)
    monkeypatch.setattr(app_module, "app", _explode)
    assert run(["version"]) == ExitCode.RUNTIME
    err = capsys.readouterr().err
    assert err == (
        "dradiag: error: internal error: RuntimeError: boom; rerun with --debug for a traceback\n"
    )
    assert run(["version", "--debug"]) == ExitCode.RUNTIME
    err = capsys.readouterr().err
    assert "Traceback (most recent call last)" in err and "RuntimeError: boom" in err
    assert err.endswith("dradiag: error: internal error: RuntimeError: boom\n")


def _commands():
    import typer

    from dradiag.cli.app import app

    root = typer.main.get_command(app)

    def walk(command, path):
        subs = getattr(command, "commands", None)
        if subs:
            for name, sub in subs.items():
                yield from walk(sub, [*path, name])
        else:
            yield path, command

    return list(walk(root, []))


def test_every_command_has_a_purpose_and_two_examples_that_parse():
    import re
    import shlex

    commands = _commands()
    assert len(commands) >= 14
    for path, command in commands:
        help_text = command.help or ""
        assert help_text.strip().splitlines()[0].strip(), path
        lines = help_text.splitlines()
        assert "Examples:" in [line.strip() for line in lines], path
        start = [line.strip() for line in lines].index("Examples:") + 1
        examples = []
        for line in lines[start:]:
            if not line.strip():
                break
            examples.append(line.strip())
        assert len(examples) >= 2, path
        for example in examples:
            # The dradiag invocation within a shell line (after a pipe, inside <(...)).
            found = re.search(r"dradiag [^|#>)]*", example)
            assert found, example
            words = shlex.split(found.group(0))
            assert words[0] == "dradiag" and words[1 : 1 + len(path)] == path, example
            args = words[1 + len(path) :]
            # The example's flags and values are the command's own: click parses them.
            ctx = command.make_context(" ".join(path), args)
            assert ctx.params is not None, example
