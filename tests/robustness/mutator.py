"""A seeded mutation fuzzer over ``--from`` inputs: malformed objects must never crash dradiag.

Offline input is hand-edited, pasted or written by other tools (issue 15 §1): a value of
the wrong type, a list where a map belongs, a junk timestamp. This module turns a real
snapshot directory (a test scenario, an embedded sample, a field case) into a mutated
copy, one change at a time, and runs ``claim``, ``pod`` and ``scan`` on it in-process
through :func:`dradiag.cli.app.run`. A run fails when it ends in an internal error: exit
code 3, any "internal error" line or a traceback, or an exit code outside {0, 1, 2, 4}.

Everything is drawn from one ``random.Random(seed)``: a failure prints the seed and the
mutation, and :func:`replay` reruns exactly that case. Used by
``tests/robustness/test_fuzz.py`` (a bounded run in CI) and ``bench/fuzz.py`` (long runs).
"""

from __future__ import annotations

import contextlib
import io
import json
import logging
import random
import sys
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson
import yaml

REPO = Path(__file__).resolve().parents[2]
_CORPUS_GLOBS = ("tests/fixtures/scenarios/*", "dradiag/samples/*", "tests/field/*/input")
_MANIFEST_SUFFIXES = (".yaml", ".yml", ".json")
_DESCRIPTION_FILES = ("expected.json", "sample.yaml", "case.yaml", "expected.yaml")
ALLOWED_EXIT_CODES = frozenset({0, 1, 2, 4})

Path_ = tuple[Any, ...]
"""Keys and indexes from a document's root to one value."""

# -- the corpus -------------------------------------------------------------------------


@dataclass(slots=True)
class Case:
    """One input directory, read once: its documents per file, its logs, its targets."""

    name: str
    manifests: dict[str, list[Any]]
    """Relative path → documents (each file's YAML stream or JSON value)."""
    others: dict[str, bytes]
    """Relative path → bytes of every other file (logs, collection.json), kept as read."""
    claim: str | None
    pod: str | None


def _claim_of(root: Path) -> str | None:
    # A field case describes its input from the folder above it (tests/field/<case>/).
    for folder in (root, root.parent):
        for name in ("expected.json", "sample.yaml", "case.yaml", "expected.yaml"):
            path = folder / name
            if not path.is_file():
                continue
            data = yaml.safe_load(path.read_text())
            if isinstance(data, dict) and isinstance(data.get("claim"), str):
                return str(data["claim"])
            if isinstance(data, dict) and data.get("command") == "claim":
                return str(data.get("target"))
    return _first_claim(root)


def _first_claim(root: Path) -> str | None:
    """``ns/name`` of the first ResourceClaim in the folder (a field case run as ``pod``)."""
    for path in sorted(root.rglob("*.y*ml")):
        try:
            docs = list(yaml.safe_load_all(path.read_text()))
        except yaml.YAMLError:
            continue
        for obj in _objects(docs):
            if obj.get("kind") == "ResourceClaim":
                meta = obj.get("metadata") or {}
                return f"{meta.get('namespace') or 'default'}/{meta.get('name')}"
    return None


def _pod_using(manifests: dict[str, list[Any]], claim: str | None) -> str | None:
    """A pod of the case naming the target claim (or any pod): the ``pod`` target."""
    ns, _, name = (claim or "/").partition("/")
    first = None
    for docs in manifests.values():
        for obj in _objects(docs):
            if obj.get("kind") != "Pod":
                continue
            meta = obj.get("metadata") or {}
            key = f"{meta.get('namespace') or 'default'}/{meta.get('name')}"
            first = first or key
            refs = (obj.get("spec") or {}).get("resourceClaims") or []
            statuses = (obj.get("status") or {}).get("resourceClaimStatuses") or []
            names = {r.get("resourceClaimName") for r in refs + statuses if isinstance(r, dict)}
            if meta.get("namespace") == ns and name in names:
                return key
    return first


def _objects(docs: list[Any]) -> Iterator[dict[str, Any]]:
    for doc in docs:
        if isinstance(doc, list):
            yield from _objects(doc)
        elif isinstance(doc, dict):
            items = doc.get("items")
            if isinstance(items, list) and str(doc.get("kind", "")).endswith("List"):
                yield from (i for i in items if isinstance(i, dict))
            else:
                yield doc


def load_case(root: Path) -> Case:
    """Read one input directory into a Case (documents decoded, other files as bytes)."""
    manifests: dict[str, list[Any]] = {}
    others: dict[str, bytes] = {}
    for path in sorted(p for p in root.rglob("*") if p.is_file()):
        rel = str(path.relative_to(root))
        if path.name in _DESCRIPTION_FILES and path.parent == root:
            continue
        if path.suffix in _MANIFEST_SUFFIXES and path.name != "collection.json":
            manifests[rel] = [d for d in yaml.safe_load_all(path.read_text()) if d is not None]
        else:
            others[rel] = path.read_bytes()
    claim = _claim_of(root)
    return Case(
        name=str(root.relative_to(REPO)),
        manifests=manifests,
        others=others,
        claim=claim,
        pod=_pod_using(manifests, claim),
    )


def corpus_roots() -> list[Path]:
    """Every scenario fixture, embedded sample and field-case input of the repository."""
    roots: list[Path] = []
    for pattern in _CORPUS_GLOBS:
        roots += sorted(p for p in REPO.glob(pattern) if p.is_dir())
    return roots


# -- mutations --------------------------------------------------------------------------

_JUNK_SCALARS: tuple[Any, ...] = (
    None,
    0,
    -1,
    2**64,
    1.5,
    float("1e308"),
    True,
    False,
    "",
    "junk",
    "x" * 300,
    "日本語",
    "{{}}",
    "\u0000",
)
_JUNK_TIMES = (
    "yesterday",
    "2026-13-45T99:99:99Z",
    "2026-05-01",
    "0000-00-00T00:00:00Z",
    "2026-05-01T10:00:00+99:00",
    "9999999999",
    1714557600,
    "",
)
_JUNK_QUANTITIES = ("-1Gi", "1.5.3", "abcMi", "1e400", "10Qi", "", "0x10", "1_000", 1e400, -5)
_JUNK_VERSIONS = ("not.a.version", "1.2.3.4", "v1.2", "", "1.2.3-", "01.02.03", "1.2.3+!")
_TIME_KEYS = ("Timestamp", "Time", "time", "lastTransitionTime", "startedAt", "finishedAt")
_QUANTITY_PARENTS = ("capacity", "counters", "requests", "limits", "allocatable")


def _walk(value: Any, path: Path_, out: list[Path_]) -> None:
    out.append(path)
    if isinstance(value, dict):
        for key, child in value.items():
            _walk(child, (*path, key), out)
    elif isinstance(value, list):
        for index, child in enumerate(value):
            _walk(child, (*path, index), out)


def _get(root: Any, path: Path_) -> Any:
    for step in path:
        root = root[step]
    return root


def _set(root: Any, path: Path_, value: Any) -> Any:
    """``root`` with the value at ``path`` replaced (containers copied along the path)."""
    if not path:
        return value
    head, rest = path[0], path[1:]
    if isinstance(root, dict):
        copy: Any = dict(root)
    else:
        copy = list(root)
    copy[head] = _set(root[head], rest, value)
    return copy


def _remove(root: Any, path: Path_) -> Any:
    parent_path, last = path[:-1], path[-1]
    parent = _get(root, parent_path)
    if isinstance(parent, dict):
        new: Any = {k: v for k, v in parent.items() if k != last}
    else:
        new = [v for i, v in enumerate(parent) if i != last]
    return _set(root, parent_path, new)


_MAX_DEPTH = 700


def _depth(value: Any) -> int:
    """How deep ``value`` nests (iteratively: it may be hundreds of levels deep)."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        item, level = stack.pop()
        deepest = max(deepest, level)
        if isinstance(item, dict):
            stack += [(v, level + 1) for v in item.values()]
        elif isinstance(item, list):
            stack += [(v, level + 1) for v in item]
    return deepest


def _deep(depth: int, leaf: Any) -> Any:
    value = leaf
    for i in range(depth):
        value = [value] if i % 2 else {"a": value}
    return value


def _typed_label(path: Path_, current: Any = None) -> str:
    """What a field at ``path`` holds when it is read: timestamp, quantity, version."""
    key = next((str(step) for step in reversed(path) if isinstance(step, str)), "")
    parents = {str(step) for step in path if isinstance(step, str)}
    if key.endswith(_TIME_KEYS) or key in _TIME_KEYS:
        return "junk timestamp"
    if parents & set(_QUANTITY_PARENTS) and (key == "value" or isinstance(current, str)):
        return "junk quantity"
    if key == "version" or "version" in key.lower():
        return "junk version"
    return "junk scalar"


_JUNK_BY_LABEL: dict[str, tuple[Any, ...]] = {
    "junk timestamp": _JUNK_TIMES,
    "junk quantity": _JUNK_QUANTITIES,
    "junk version": _JUNK_VERSIONS,
    "junk scalar": _JUNK_SCALARS,
}


def _typed_junk(rng: random.Random, path: Path_, current: Any) -> tuple[str, Any]:
    """A junk value fitting the field: timestamps, quantities, versions, else any type."""
    label = _typed_label(path, current)
    return label, rng.choice(_JUNK_BY_LABEL[label])


def mutate_value(rng: random.Random, doc: Any) -> tuple[Any, str]:
    """``doc`` with one random change, and a description of it."""
    paths: list[Path_] = []
    _walk(doc, (), paths)
    op = rng.choice(
        ("null", "number", "string", "list", "map", "remove", "truncate", "deep", "typed", "typed")
    )
    typed = [p for p in paths if _typed_label(p) != "junk scalar"]
    # Typed junk goes where a timestamp, quantity or version is read, when there is one.
    path = (
        rng.choice(typed) if op == "typed" and typed and rng.random() < 0.8 else rng.choice(paths)
    )
    current = _get(doc, path)
    where = "$" + "".join(f"[{s}]" if isinstance(s, int) else f".{s}" for s in path)
    if op == "remove" and path:
        return _remove(doc, path), f"remove {where}"
    if op == "truncate" and isinstance(current, list) and current:
        keep = rng.randrange(len(current))
        return _set(doc, path, current[:keep]), f"truncate {where} to {keep}"
    if op == "truncate" and isinstance(current, str) and current:
        keep = rng.randrange(len(current))
        return _set(doc, path, current[:keep]), f"truncate string {where} to {keep}"
    if op == "deep":
        # Kept under ~700 levels in all, so the mutated file can still be written.
        depth = min(rng.choice((30, 200, 600)), _MAX_DEPTH - len(path) - _depth(current))
        if depth > 0:
            return _set(doc, path, _deep(depth, current)), f"nest {where} {depth} deep"
        op = "null"
    replacements: dict[str, Any] = {
        "null": None,
        "number": rng.choice((0, -1, 7, 3.25, 2**70)),
        "string": rng.choice(("", "junk", "1", "true", "null")),
        "list": rng.choice(([], [current], ["x", 1])),
        "map": rng.choice(({}, {"x": current}, {"": None})),
    }
    if op in replacements:
        value = replacements[op]
        return _set(doc, path, value), f"{op} at {where}: {value!r}"[:200]
    label, value = _typed_junk(rng, path, current)
    return _set(doc, path, value), f"{label} at {where}: {value!r}"[:200]


@dataclass(slots=True)
class Mutation:
    """One mutated case: which file changed, how, and the files to write."""

    case: Case
    seed: int
    described: list[str] = field(default_factory=list)
    manifests: dict[str, list[Any]] = field(default_factory=dict)
    others: dict[str, bytes] = field(default_factory=dict)


def _mutate_log(rng: random.Random, data: bytes) -> tuple[bytes, str]:
    choice = rng.randrange(4)
    if choice == 0:
        return b"\xff\xfe\x00junk\x80" + data, "non-UTF-8 bytes in log"
    if choice == 1:
        return data[: rng.randrange(len(data) + 1)], "log truncated"
    if choice == 2:
        return b"", "log emptied"
    return data + b"\n" + b"E" * 100_000 + b"\n", "one 100 kB log line"


def mutate_case(case: Case, seed: int, changes: int | None = None) -> Mutation:
    """``case`` with one to three random changes drawn from ``seed``."""
    rng = random.Random(seed)
    out = Mutation(case=case, seed=seed, manifests=dict(case.manifests), others=dict(case.others))
    logs = [k for k in case.others if k.endswith(".log")]
    for _ in range(changes or rng.choice((1, 1, 1, 2, 3))):
        if logs and rng.random() < 0.05:
            rel = rng.choice(logs)
            out.others[rel], what = _mutate_log(rng, out.others[rel])
            out.described.append(f"{rel}: {what}")
            continue
        files = [k for k, docs in out.manifests.items() if docs]
        if not files:
            break
        rel = rng.choice(files)
        docs = out.manifests[rel]
        index = rng.randrange(len(docs))
        new_doc, what = mutate_value(rng, docs[index])
        out.manifests[rel] = [*docs[:index], new_doc, *docs[index + 1 :]]
        out.described.append(f"{rel}#{index}: {what}")
    return out


def _encode(docs: list[Any]) -> bytes:
    """JSON: YAML's subset, so a ``.yaml`` name reads it too (several documents: an array)."""
    try:
        if len(docs) == 1:
            return orjson.dumps(docs[0])
        return orjson.dumps(docs)
    except (TypeError, orjson.JSONEncodeError):
        # Values orjson refuses (integers beyond 64 bits, nesting past 255): the stdlib.
        return json.dumps(docs[0] if len(docs) == 1 else docs).encode()


def write_mutation(mutation: Mutation, root: Path) -> None:
    """Write the mutated case as a ``--from`` directory at ``root``."""
    for rel, docs in mutation.manifests.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(_encode(docs))
    for rel, data in mutation.others.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)


# -- running ----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Crash:
    """A run that ended in an internal error: enough to replay it."""

    case: str
    seed: int
    argv: tuple[str, ...]
    exit_code: int
    described: tuple[str, ...]
    stderr: str

    def __str__(self) -> str:
        tail = self.stderr.strip().splitlines()[-3:]
        return (
            f"{self.case} seed={self.seed}: dradiag {' '.join(self.argv)} -> exit "
            f"{self.exit_code}; mutation: {'; '.join(self.described)}; stderr: {' | '.join(tail)}"
        )


def commands_for(case: Case, root: Path, rng: random.Random) -> list[list[str]]:
    """``claim``, ``pod`` and ``scan`` argument lists on the mutated directory."""
    # Mostly JSON, the canonical document; text and YAML render from it (and cost more).
    output = rng.choices(("json", "text", "yaml"), weights=(14, 5, 1))[0]
    argv = []
    if case.claim:
        argv.append(["claim", case.claim, "--from", str(root), "-o", output])
    if case.pod:
        argv.append(["pod", case.pod, "--from", str(root), "-o", output])
    argv.append(["scan", "-A", "--from", str(root), "-o", output])
    return argv


_RUNS = [0]
"""In-process runs so far (``run_cli``)."""


def run_cli(argv: list[str]) -> tuple[int, str]:
    """``dradiag ARGV`` in-process: (exit code, stderr). A raised exception is a crash.

    The command function is called directly, with the exceptions mapped to exit codes
    as :func:`dradiag.cli.app.run` maps them: building Typer's command tree costs more
    than the diagnosis of a small snapshot, on every call. ``DRADIAG_FUZZ_VIA_TYPER=1``
    goes through ``run()`` itself.
    """
    import os

    from dradiag.cli import app

    stdout, stderr = io.StringIO(), io.StringIO()
    # Every load and scan freezes what is alive into the permanent generation
    # (snapshot.paused_gc: right for a one-shot CLI process, and the collector is paused
    # for most of a run). Run after run in one process, the cyclic garbage of earlier runs
    # would never be collected: a 10,000-mutation run grew past 7 GiB. Unfreeze and collect
    # it every so many runs (each full collection costs tens of milliseconds).
    import gc

    _RUNS[0] += 1
    if _RUNS[0] % 50 == 0:
        gc.unfreeze()
        gc.collect()
    with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
        try:
            if os.environ.get("DRADIAG_FUZZ_VIA_TYPER"):
                code = app.run(argv)
            else:
                code = _call_command(argv)
        except BaseException:  # noqa: BLE001 - whatever escapes is the finding
            import traceback

            stderr.write("Traceback (escaped the command):\n" + traceback.format_exc())
            code = -1
    return code, stderr.getvalue()


def _call_command(argv: list[str]) -> int:
    from dradiag.cli import app
    from dradiag.cli.commands.claim import claim
    from dradiag.cli.commands.pod import pod
    from dradiag.cli.commands.scan import scan
    from dradiag.cli.options import OutputFormat
    from dradiag.errors import ClusterUnreachable, DradiagError

    app._configure_logging(logging.WARNING)
    name, rest = argv[0], argv[1:]
    options: dict[str, Any] = {}
    positional = []
    i = 0
    while i < len(rest):
        if rest[i] == "--from":
            options["from_path"], i = rest[i + 1], i + 2
        elif rest[i] == "-o":
            options["output"], i = OutputFormat(rest[i + 1]), i + 2
        elif rest[i] == "-A":
            options["all_namespaces"], i = True, i + 1
        else:
            positional.append(rest[i])
            i += 1
    command: Callable[..., int] = {"claim": claim, "pod": pod, "scan": scan}[name]
    try:
        return int(command(*positional, **options))
    except ClusterUnreachable as exc:
        sys.stderr.write(f"dradiag: error: {exc}\n")
        return 3
    except DradiagError as exc:
        sys.stderr.write(f"dradiag: error: {exc}\n")
        return 2
    except Exception as exc:  # noqa: BLE001 - as run() does: the internal error
        sys.stderr.write(f"dradiag: error: internal error: {type(exc).__name__}: {exc}\n")
        import traceback

        sys.stderr.write("Traceback:\n" + traceback.format_exc())
        return 3


def is_crash(code: int, stderr: str) -> bool:
    """An internal error, a traceback or an exit code outside {0, 1, 2, 4}."""
    return code not in ALLOWED_EXIT_CODES or "internal error" in stderr or "Traceback" in stderr


def check_mutation(mutation: Mutation, workdir: Path) -> list[Crash]:
    """Write ``mutation`` under ``workdir`` and run every command on it.

    The three commands share one load of the directory (``obtain_snapshot`` answers
    from a cache for this mutation): for inputs this small, ``claim``/``pod`` load
    exactly what ``scan`` does (no list is large enough to defer), and the load, shape
    check included, is deterministic. It runs once per mutation instead of three times.
    """
    # One directory per case, overwritten: a mutation changes files, never their set.
    root = workdir / _safe_name(mutation.case.name)
    write_mutation(mutation, root)
    crashes = []
    rng = random.Random(mutation.seed ^ 0x5EED)
    with _one_load_per_mutation():
        for argv in commands_for(mutation.case, root, rng):
            code, stderr = run_cli(argv)
            if is_crash(code, stderr):
                crashes.append(
                    Crash(
                        case=mutation.case.name,
                        seed=mutation.seed,
                        argv=tuple(argv),
                        exit_code=code,
                        described=tuple(mutation.described),
                        stderr=stderr,
                    )
                )
    return crashes


def _safe_name(name: str) -> str:
    return name.replace("/", "__")


@contextlib.contextmanager
def _one_load_per_mutation() -> Iterator[None]:
    from dradiag.cli import inputs

    original = inputs.obtain_snapshot
    loaded: dict[str, Any] = {}

    def cached(options: Any, target: Any) -> Any:
        key = str(options.from_path)
        if key not in loaded:
            try:
                loaded[key] = original(options, target)
            except Exception as exc:  # noqa: BLE001 - replayed to each command alike
                loaded[key] = exc
        found = loaded[key]
        if isinstance(found, Exception):
            raise found
        return found

    inputs.obtain_snapshot = cached  # type: ignore[assignment]
    try:
        yield
    finally:
        inputs.obtain_snapshot = original  # type: ignore[assignment]


def fuzz(
    cases: list[Case],
    *,
    seed: int,
    mutations: int,
    on_crash: Callable[[Crash], None] | None = None,
) -> tuple[int, list[Crash]]:
    """``mutations`` mutations round-robin over ``cases``: (runs made, crashes found).

    Mutation ``i`` uses the seed ``seed + i``, so each one replays on its own.
    """
    crashes: list[Crash] = []
    runs = 0
    with tempfile.TemporaryDirectory(prefix="dradiag-fuzz-") as tmp:
        workdir = Path(tmp)
        for i in range(mutations):
            case = cases[i % len(cases)]
            mutation = mutate_case(case, seed + i)
            found = check_mutation(mutation, workdir)
            runs += len(commands_for(case, workdir, random.Random(0)))
            for crash in found:
                if on_crash is not None:
                    on_crash(crash)
            crashes += found
    return runs, crashes


def replay(case_dir: str, seed: int) -> list[Crash]:
    """Rerun one mutation (the case directory relative to the repository, and its seed)."""
    case = load_case(REPO / case_dir)
    with tempfile.TemporaryDirectory(prefix="dradiag-fuzz-") as tmp:
        return check_mutation(mutate_case(case, seed), Path(tmp))
