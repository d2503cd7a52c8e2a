"""kubectl conventions across commands: -o offers exactly each command's formats, -n is
namespace (never node), --now is one option, bare groups print help (exit 0)."""

from __future__ import annotations

import pytest
import typer

from dradiag.cli.app import app, run
from dradiag.cli.exit_codes import ExitCode

FORMATS = {
    ("claim",): ["text", "json", "yaml"],
    ("pod",): ["text", "json", "yaml"],
    ("scan",): ["text", "wide", "name", "json", "yaml", "sarif"],
    ("selector-check",): ["text", "json", "yaml", "sarif"],
    ("inventory",): ["text", "wide", "json", "yaml"],
    ("simulate",): ["text", "json", "yaml"],
    ("node",): ["text", "json", "yaml"],
    ("explain",): ["text", "json", "yaml"],
    ("version",): ["text", "json", "yaml"],
    ("rules", "list"): ["text", "json", "yaml"],
}


def _command(path: tuple[str, ...]):
    command = typer.main.get_command(app)
    for name in path:
        command = command.commands[name]  # type: ignore[attr-defined]
    return command


def _option(path: tuple[str, ...], flag: str):
    for param in _command(path).params:
        if flag in getattr(param, "opts", ()):
            return param
    return None


@pytest.mark.parametrize(("path", "formats"), FORMATS.items())
def test_output_help_lists_exactly_the_commands_formats(path, formats, capsys) -> None:
    option = _option(path, "-o")
    assert option is not None
    assert option.metavar == "|".join(formats)
    listed = ", ".join(formats[:-1]) + f" or {formats[-1]}"
    assert option.help == f"Output format: {listed}."
    for value in ("sarif", "wide", "xml"):
        if value in formats:
            continue
        capsys.readouterr()
        code = run([*path, "-o", value, "x"])
        err = capsys.readouterr().err
        assert code == ExitCode.USAGE, (path, value)
        assert f"Invalid value for '-o' / '--output': '{value}' is not one of" in err
        assert "Value error" not in err


@pytest.mark.parametrize("path", [p for p in FORMATS if _option(p, "-n") is not None])
def test_n_is_namespace_wherever_it_exists(path) -> None:
    option = _option(path, "-n")
    assert option.name == "namespace", path


def test_inventory_node_is_long_only() -> None:
    assert _option(("inventory",), "--node").opts == ["--node"]
    assert _option(("inventory",), "-n") is None


def test_now_means_one_thing() -> None:
    """Every --now is the RFC 3339 time to judge ages against (one option, one meaning)."""
    from dradiag.cli.options import Now

    expected = Now.__metadata__[0].help
    found = []
    for path, _ in _walk():
        option = _option(path, "--now")
        if option is not None:
            found.append(path)
            assert option.help == expected, path
            assert not option.is_flag, path
    assert ("claim",) in found and ("scan",) in found and ("pod",) in found
    assert _option(("selector-check",), "--free") is not None


def _walk():
    root = typer.main.get_command(app)

    def walk(command, path):
        subs = getattr(command, "commands", None)
        if subs:
            for name, sub in subs.items():
                yield from walk(sub, (*path, name))
        else:
            yield path, command

    return list(walk(root, ()))


@pytest.mark.parametrize("argv", [[], ["rules"], ["-v"], ["completion"]])
def test_bare_dradiag_and_groups_print_help(argv, capsys) -> None:
    capsys.readouterr()
    code = run(argv)
    out = capsys.readouterr().out
    if argv == ["completion"]:
        # completion is a command that needs its SHELL argument: a usage error.
        assert code == ExitCode.USAGE
        return
    assert code == ExitCode.OK
    assert out.startswith("Usage:")


def test_durations_show_readable_defaults(capsys) -> None:
    assert run(["claim", "--help"]) == ExitCode.OK
    out = " ".join(capsys.readouterr().out.split())
    # Durations' defaults as the user types them, in the help text (no float, no click
    # "(10s)").
    assert "--request-timeout DURATION" in out and "Default: 10s." in out
    assert "Default: 60s." in out and "Default: 5m." in out
    assert "[default: (" not in out and "60.0" not in out


@pytest.mark.parametrize("path", [p for p, _ in _walk()], ids=" ".join)
def test_help_metavars_are_readable(path, capsys) -> None:
    """Usage lines as click/kubectl write them (NS/NAME, [FILE...]); no typer type tags
    (<str>, <list[str]>, <float>) beside a metavar."""
    capsys.readouterr()
    assert run([*path, "--help"]) == ExitCode.OK
    out = capsys.readouterr().out
    usage = out.splitlines()[0]
    assert usage.startswith(f"Usage: dradiag {' '.join(path)} [OPTIONS]")
    assert "{" not in usage
    for tag in ("<str>", "<list[", "<float>", "<int>", "<bool>"):
        assert tag not in out, (path, tag)


@pytest.mark.parametrize("flag", [["-l", "app=x"], ["--field-selector", "metadata.name=x"], ["-A"]])
@pytest.mark.parametrize("command", ["claim", "pod"])
def test_named_object_commands_take_no_selector_or_all_namespaces(command, flag, capsys) -> None:
    """kubectl refuses a name with a selector; a named object is in one namespace."""
    capsys.readouterr()
    assert run([command, "ml/x", *flag]) == ExitCode.USAGE
    assert "No such option" in capsys.readouterr().err
