"""One run of a diagnosing command (``claim``, ``pod``, ``scan``, ``demo``), start to end.

The flags become WalkOptions and a Snapshot, the diagnoses become one document on stdout,
and the verdicts become the exit code (DESIGN §3). The command modules keep only what
differs: their arguments, what they diagnose and how the text view is drawn.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from dradiag.cli.options import OutputFormat

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence

    from dradiag.cli.inputs import Target
    from dradiag.cli.options import CommonOptions
    from dradiag.diagnosis.context import WalkOptions
    from dradiag.diagnosis.model import Diagnosis
    from dradiag.snapshot.model import Kind, KindRecord, Snapshot


def walk_options(now: str | None, stuck_after: float) -> WalkOptions:
    """``--now`` and ``--stuck-after`` (seconds, already parsed by the option) as
    WalkOptions; UsageError when ``--now`` is not an RFC 3339 time."""
    from datetime import timedelta

    from dradiag.analyses.timeline import parse_time
    from dradiag.diagnosis.context import WalkOptions
    from dradiag.errors import UsageError

    parsed_now = None
    if now is not None:
        parsed_now = parse_time(now)
        if parsed_now is None:
            raise UsageError(f"--now: not an RFC 3339 time: {now!r} (e.g. 2026-05-01T10:00:00Z)")
    return WalkOptions(now=parsed_now, stuck_after=timedelta(seconds=stuck_after))


def common_options(
    *,
    from_path: str | None,
    kubeconfig: str | None,
    context: str | None,
    namespace: str | None,
    request_timeout: float,
    timeout: float,
    as_user: str | None,
    as_groups: Sequence[str] | None,
    output: OutputFormat,
    no_color: bool,
    exit_zero: bool,
    all_namespaces: bool = False,
) -> CommonOptions:
    """The common options of one run as one value."""
    from dradiag.cli.options import CommonOptions

    return CommonOptions(
        from_path=from_path,
        kubeconfig=kubeconfig,
        context=context,
        namespace=namespace,
        all_namespaces=all_namespaces,
        request_timeout=request_timeout,
        timeout=timeout,
        as_user=as_user,
        as_groups=tuple(as_groups or ()),
        output=output,
        no_color=no_color,
        exit_zero=exit_zero,
    )


def read_snapshot(target: Target, **options: Any) -> Snapshot:
    """The Snapshot the common options point at: ``--from`` offline, else the live cluster.

    ``options``: the keyword arguments of :func:`common_options`.
    """
    from dradiag.cli.inputs import obtain_snapshot

    return obtain_snapshot(common_options(**options), target)


def existing_names(
    snapshot: Snapshot, kind: Kind, namespace: str, options: CommonOptions
) -> list[tuple[str, str]]:
    """(namespace, name) of the objects of ``kind`` there are, for "did you mean": the
    snapshot's offline; live, a list of names read now (a targeted read has only one)."""
    from dradiag.snapshot.model import name_of, namespace_of

    if options.from_path is None:
        from dradiag.sources.live_names import object_names

        return object_names(options, kind, namespace)
    objects = snapshot.claims if kind.value == "ResourceClaim" else snapshot.pods
    return [(namespace_of(o), name_of(o)) for o in objects]


def use_color(no_color: bool) -> bool:
    """Colour only on a TTY, never with ``--no-color`` or ``NO_COLOR`` (DESIGN §3)."""
    from dradiag.render.console import plain

    return not plain(no_color)


def exit_code_for(diagnoses: Iterable[Diagnosis], exit_zero: bool) -> int:
    """1 when anything is broken, else 4 when anything is inconclusive, else 0."""
    from dradiag.cli.exit_codes import ExitCode
    from dradiag.diagnosis.model import VerdictStatus

    if exit_zero:
        return ExitCode.OK
    statuses = {d.verdict.status for d in diagnoses}
    if VerdictStatus.BROKEN in statuses:
        return ExitCode.BROKEN
    if VerdictStatus.INCONCLUSIVE in statuses:
        return ExitCode.INCONCLUSIVE
    return ExitCode.OK


def emit(doc: Mapping[str, Any], output: OutputFormat, text: str | None) -> None:
    """Write the document (or its text view) to stdout, and nothing else."""
    import sys

    from dradiag.render.document import dump_document

    if output is OutputFormat.TEXT and text is not None:
        sys.stdout.write(text)
    else:
        sys.stdout.write(dump_document(doc, output.value))
    sys.stdout.flush()


def diagnoses_document(
    snapshot: Snapshot, diagnoses: Iterable[Diagnosis], unread: Sequence[KindRecord] = ()
) -> dict[str, Any]:
    """The document of several diagnoses of one snapshot (``pod``, ``scan``); ``unread``:
    the kinds the command needed and could not read (``snapshot.coverage.unread``)."""
    from dradiag.render import document

    collection = document.collection_of(snapshot)
    return document.diagnoses_document(
        [document.diagnosis_document(d, snapshot.source, collection) for d in diagnoses],
        document.collection_of(snapshot, unread),
    )


def report(
    doc: Mapping[str, Any],
    diagnoses: Iterable[Diagnosis],
    *,
    render: Callable[..., str],
    output: OutputFormat,
    no_color: bool,
    exit_zero: bool,
    inconclusive: bool = False,
) -> int:
    """Emit ``doc`` (drawn by ``render`` for ``-o text``) and return the exit code;
    ``inconclusive``: a read the answer needed failed, so nothing broken is exit 4."""

    text = render(doc, color=use_color(no_color)) if output is OutputFormat.TEXT else None
    emit(doc, output, text)
    return final_code(diagnoses, exit_zero=exit_zero, inconclusive=inconclusive)


def final_code(diagnoses: Iterable[Diagnosis], *, exit_zero: bool, inconclusive: bool) -> int:
    """``report``'s exit code: ``exit_code_for``, and 4 when nothing is broken but a read
    the answer needed failed (``inconclusive``)."""
    from dradiag.cli.exit_codes import ExitCode

    code = exit_code_for(diagnoses, exit_zero)
    if code == ExitCode.OK and inconclusive and not exit_zero:
        return ExitCode.INCONCLUSIVE
    return code


def stream_diagnoses_json(
    snapshot: Snapshot,
    diagnoses: list[Diagnosis],
    unread: Sequence[KindRecord] = (),
    extra: Mapping[str, Any] | None = None,
) -> None:
    """Write ``diagnoses_document(snapshot, diagnoses, unread)`` (with ``extra``'s blocks
    after ``collection``) as JSON to stdout, one item at a time, and empty ``diagnoses``
    as it goes (``scan``: each diagnosis is dropped once its item is written, so the
    document never exists whole in memory)."""
    import sys

    from dradiag.render import document

    collection = document.collection_of(snapshot)

    def items() -> Iterator[dict[str, Any]]:
        diagnoses.reverse()  # pop() from the end is O(1); the order written is unchanged
        while diagnoses:
            yield document.diagnosis_document(diagnoses.pop(), snapshot.source, collection)

    document.write_diagnoses_json(
        items(), document.collection_of(snapshot, unread), sys.stdout.write, extra
    )
    sys.stdout.flush()
