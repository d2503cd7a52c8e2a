"""Reading a bundle (``--from bundle.tar.gz`` or its unpacked folder) safely.

An archive from a customer is untrusted input. It is read member by member from the
gzip stream into memory, never unpacked to disk (no ``tarfile.extractall``: nothing is
written anywhere, so no link or name can point a write outside), and refused with one
line (exit 2) when any member is hostile or the archive is broken:

- a name that is absolute, has ``..``, a drive or backslash, or appears twice;
- anything but a regular file or a directory: symlinks, hard links, devices, FIFOs;
- more than :data:`MAX_MEMBERS` members, more than :data:`MAX_TOTAL_BYTES` unpacked or
  :data:`MAX_MEMBER_BYTES` in one member, or an unpacked/packed ratio over
  :data:`MAX_RATIO` (tar and gzip bombs, counted while decompressing);
- a truncated or corrupt gzip stream or tar header.

Reading in memory is also what keeps a large bundle fast: its 5,000 log files would
otherwise cost as many file creations, directories and deletions (on an overlay
filesystem, tens of seconds).

``manifest.json`` maps onto the coverage model of ``collection.json``: a collector that
read its kind is ``collected``, one the server does not serve is ``absent``, and one that
failed or was skipped — or a kind the manifest does not mention — is ``unknown``.
"""

from __future__ import annotations

import gzip
import re
import tarfile
import zlib
from collections.abc import Mapping
from pathlib import Path, PurePosixPath
from typing import IO, Any

from dradiag.errors import InputError

MAX_MEMBERS = 200_000
MAX_TOTAL_BYTES = 4 * 1024**3
MAX_MEMBER_BYTES = 1024**3
MAX_RATIO = 500.0
"""Unpacked bytes per packed byte allowed. Cluster JSON and logs pack 10-100x; deflate
cannot pass about 1,030x, so a bomb is a large archive of one repeated byte, caught here
or by :data:`MAX_TOTAL_BYTES`."""
RATIO_GRACE_BYTES = 64 * 1024**2
"""The ratio is checked only past this much unpacked data (tiny archives pack oddly)."""
GZIP_MAGIC = b"\x1f\x8b"
MANIFEST = "manifest.json"
BUNDLE_FILES = frozenset({MANIFEST, "redactions.json", "analysis.json"})
"""A bundle's own top-level files (``bundle_write`` writes them): not Kubernetes objects."""
BUNDLE_SCHEMA_PREFIX = "dradiag.bundle/"
_KLOG_TIMESTAMP = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?(?:Z|[+-]\d\d:\d\d) ", re.M)
"""The RFC 3339 prefix ``timestamps=true`` puts before each container log line."""


def is_archive(path: Path) -> bool:
    """True for a gzip file (by its magic number, whatever its name)."""
    try:
        with path.open("rb") as f:
            return f.read(2) == GZIP_MAGIC
    except OSError:
        return False


class _CountingReader:
    """A file wrapper that counts packed bytes read, for the compression-ratio cap."""

    def __init__(self, raw: IO[bytes]) -> None:
        self.raw = raw
        self.count = 0

    def read(self, size: int = -1) -> bytes:
        data = self.raw.read(size)
        self.count += len(data)
        return data


def _safe_name(name: str, path: str) -> PurePosixPath:
    if not name or "\\" in name or "\x00" in name:
        raise InputError(f"refused: archive member {name!r} has an unsafe name", path=path)
    pure = PurePosixPath(name)
    if pure.is_absolute() or re.match(r"^[A-Za-z]:", name):
        raise InputError(f"refused: archive member {name!r} is an absolute path", path=path)
    parts = [p for p in pure.parts if p not in ("", ".")]
    if any(p == ".." for p in parts):
        raise InputError(f"refused: archive member {name!r} leaves the bundle (..)", path=path)
    if not parts:
        raise InputError(f"refused: archive member {name!r} has an empty name", path=path)
    return PurePosixPath(*parts)


def _member_kind(member: tarfile.TarInfo) -> str | None:
    """None for a regular file or directory, else what the member is."""
    if member.isreg() or member.isdir():
        return None
    if member.issym():
        return "a symbolic link"
    if member.islnk():
        return "a hard link"
    if member.isfifo():
        return "a FIFO"
    if member.isdev():
        return "a device file"
    return "not a regular file"


def read_archive(archive: Path) -> dict[str, bytes]:
    """Every regular file of ``archive`` (member path → bytes), refusing hostility.

    Nothing is written anywhere: members are checked and read one by one from the
    stream, so a refused archive leaves no trace and links have nothing to point into.
    """
    label = str(archive)
    members: dict[str, bytes] = {}
    total = 0
    count = 0
    try:
        with archive.open("rb") as raw:
            counting = _CountingReader(raw)
            # gzip decompresses in large blocks; tarfile's own "r|gz" path does it in 10 KiB
            # pieces with a growing buffer (3x slower on a 5,000-node bundle).
            unzipped = gzip.GzipFile(fileobj=counting, mode="rb")  # type: ignore[call-overload]
            with tarfile.open(fileobj=unzipped, mode="r|") as tar:
                for member in tar:
                    count += 1
                    if count > MAX_MEMBERS:
                        raise InputError(
                            f"refused: more than {MAX_MEMBERS} archive members", path=label
                        )
                    name = _safe_name(member.name, label)
                    what = _member_kind(member)
                    if what is not None:
                        raise InputError(
                            f"refused: archive member {member.name!r} is {what}", path=label
                        )
                    if member.isdir():
                        continue
                    if member.size > MAX_MEMBER_BYTES:
                        raise InputError(
                            f"refused: archive member {member.name!r} is larger than "
                            f"{MAX_MEMBER_BYTES} bytes",
                            path=label,
                        )
                    key = str(name)
                    if key in members:
                        raise InputError(
                            f"refused: archive member {key!r} appears twice", path=label
                        )
                    source = tar.extractfile(member)
                    if source is None:
                        raise InputError(f"refused: archive member {member.name!r}", path=label)
                    data, total = _read_capped(source, total, counting, label)
                    members[key] = data
    except InputError:
        raise
    except tarfile.ReadError as exc:
        # The gzip layer was fine (or nearly): this may be one compressed file, not a tar.
        reason = str(exc) or type(exc).__name__
        raise InputError(
            f"corrupt or truncated bundle archive: {reason} (a gzip-compressed manifest is "
            "read when its name ends in .yaml.gz, .yml.gz or .json.gz)",
            path=label,
        ) from None
    except (tarfile.TarError, EOFError, zlib.error, OSError) as exc:
        reason = str(exc) or type(exc).__name__
        raise InputError(f"corrupt or truncated bundle archive: {reason}", path=label) from None
    _check_tree(members, label)
    return members


def read_gzip_file(path: Path) -> bytes:
    """The decompressed bytes of one gzip-compressed file (``pods.yaml.gz``), under the
    archive's caps (total size and ratio: a bomb is refused as in a bundle)."""
    label = str(path)
    try:
        with path.open("rb") as raw:
            counting = _CountingReader(raw)
            unzipped = gzip.GzipFile(fileobj=counting, mode="rb")  # type: ignore[call-overload]
            data, _total = _read_capped(unzipped, 0, counting, label)
    except InputError:
        raise
    except (EOFError, zlib.error, OSError) as exc:
        reason = str(exc) or type(exc).__name__
        raise InputError(f"corrupt or truncated gzip file: {reason}", path=label) from None
    return data


def _check_tree(members: Mapping[str, bytes], label: str) -> None:
    """No member may also be another's directory (``a`` and ``a/b``)."""
    directories = {
        "/".join(name.split("/")[:i]) for name in members for i in range(1, name.count("/") + 1)
    }
    clash = sorted(directories & members.keys())
    if clash:
        raise InputError(
            f"refused: archive member {clash[0]!r} is both a file and a directory", path=label
        )


def _read_capped(
    source: IO[bytes], total: int, counting: _CountingReader, label: str
) -> tuple[bytes, int]:
    chunks = []
    while chunk := source.read(1024 * 1024):
        total += len(chunk)
        if total > MAX_TOTAL_BYTES:
            raise InputError(
                f"refused: the archive unpacks to more than {MAX_TOTAL_BYTES} bytes", path=label
            )
        if total > RATIO_GRACE_BYTES and total > MAX_RATIO * max(counting.count, 1):
            raise InputError(
                f"refused: the archive unpacks more than {MAX_RATIO:g} times its size "
                "(a compression bomb?)",
                path=label,
            )
        chunks.append(chunk)
    return b"".join(chunks), total


# -- the manifest -----------------------------------------------------------------------


def read_manifest(directory: Path) -> Mapping[str, Any] | None:
    """The manifest when ``directory`` is a bundle (else None)."""
    path = directory / MANIFEST
    if not path.is_file() or path.is_symlink():
        return None
    return parse_manifest(path.read_bytes(), str(directory))


def parse_manifest(data: bytes | None, label: str) -> Mapping[str, Any] | None:
    """``manifest.json``'s document when it is a dradiag bundle's (else None)."""
    if data is None:
        return None
    import orjson

    try:
        doc = orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        raise InputError(f"malformed bundle manifest: {exc}", path=f"{label}/{MANIFEST}") from None
    if not isinstance(doc, Mapping) or not str(doc.get("schemaVersion") or "").startswith(
        BUNDLE_SCHEMA_PREFIX
    ):
        return None
    return doc


def holds_objects(parts: tuple[str, ...]) -> bool:
    """False for a bundle's own top-level files (manifest, redactions, analysis) and its
    ``node/`` state: they are not Kubernetes objects or container logs."""
    if not parts:
        return False
    if len(parts) == 1 and parts[0] in BUNDLE_FILES:
        return False
    return parts[0] != "node"


_COVERAGE_BY_STATUS = {"collected": "collected", "absent": "absent"}


def collection_record(manifest: Mapping[str, Any], kinds: list[str]) -> dict[str, Any]:
    """The manifest as a ``collection.json`` record: per kind coverage, errors, source.

    ``kinds`` are every Kind the Snapshot holds: one the manifest does not mention was
    not collected, so it is ``unknown`` (never an empty ``collected``).
    """
    record_kinds: dict[str, dict[str, Any]] = {
        kind: {"coverage": "unknown", "reason": "not collected in this bundle"} for kind in kinds
    }
    for entry in manifest.get("collectors") or []:
        if not isinstance(entry, Mapping) or entry.get("kind") not in record_kinds:
            continue
        status = str(entry.get("status") or "")
        coverage = _COVERAGE_BY_STATUS.get(status, "unknown")
        reason = entry.get("reason") or entry.get("error")
        if coverage == "unknown" and not reason:
            reason = f"bundle collector {entry.get('name')}: {status or 'no status'}"
        record_kinds[str(entry["kind"])] = {
            "coverage": coverage,
            "reason": reason,
            "scope": entry.get("scope"),
        }
    server = manifest.get("server") or {}
    return {
        "kinds": record_kinds,
        "errors": [e for e in manifest.get("errors") or [] if isinstance(e, Mapping)],
        "source": {
            "kind": "bundle",
            "context": None,
            "collectedAt": manifest.get("collectedAt"),
            "serverVersion": server.get("version") if isinstance(server, Mapping) else None,
            "servedVersions": list(server.get("servedVersions") or [])
            if isinstance(server, Mapping)
            else [],
        },
    }


def strip_log_timestamps(text: str) -> str:
    """A log read with ``timestamps=true`` as the container wrote it (the live reads' form)."""
    return _KLOG_TIMESTAMP.sub("", text)
