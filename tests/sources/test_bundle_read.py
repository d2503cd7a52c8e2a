"""Hostile and broken bundle archives are refused with exit 2 and write nothing, neither
outside nor inside a temp dir: archives are read in memory (issue 12: path traversal,
absolute paths, symlink and hard-link escapes, device files, tar and gzip bombs,
truncation, corruption)."""

from __future__ import annotations

import gzip
import io
import tarfile
import tempfile
from pathlib import Path

import pytest

from dradiag.cli.app import run
from dradiag.sources import bundle_read

CLAIM = b"""{"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
 "metadata": {"name": "c", "namespace": "ml", "uid": "u1"}, "spec": {"devices": {"requests": []}}}
"""


def _archive(path: Path, members: list[tarfile.TarInfo | tuple[str, bytes]]) -> Path:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.GNU_FORMAT) as tar:
        for member in members:
            if isinstance(member, tarfile.TarInfo):
                tar.addfile(member)
            else:
                name, data = member
                info = tarfile.TarInfo(name)
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
    path.write_bytes(gzip.compress(buffer.getvalue(), mtime=0))
    return path


def _special(name: str, kind: bytes, linkname: str = "") -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type = kind
    info.linkname = linkname
    return info


@pytest.fixture
def private_tmp(tmp_path, monkeypatch):
    """Temp dirs are made under ``tmp_path/tmp``; the test checks what is left there."""
    root = tmp_path / "tmp"
    root.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(root))
    return root


def _refused(archive: Path, capsys, expected: str) -> None:
    capsys.readouterr()
    code = run(["claim", "ml/c", "--from", str(archive), "-o", "json"])
    captured = capsys.readouterr()
    assert code == 2
    assert captured.out == ""
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("dradiag: error: "), captured.err
    assert expected in lines[0]


HOSTILE = {
    "traversal": ([("resources/ok.json", CLAIM), ("../escape.json", CLAIM)], "leaves the bundle"),
    "nested traversal": ([("logs/../../escape.json", CLAIM)], "leaves the bundle"),
    "absolute": ([("/tmp/dradiag-escape.json", CLAIM)], "absolute path"),
    "symlink escape": (
        [_special("logs", tarfile.SYMTYPE, "/"), ("logs/escape.json", CLAIM)],
        "symbolic link",
    ),
    "hard link escape": ([_special("passwd.json", tarfile.LNKTYPE, "/etc/passwd")], "hard link"),
    "device": ([_special("dev.json", tarfile.CHRTYPE)], "device file"),
    "fifo": ([_special("fifo.json", tarfile.FIFOTYPE)], "FIFO"),
}


@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_hostile_archive_refused_and_nothing_written(case, tmp_path, private_tmp, capsys):
    members, expected = HOSTILE[case]
    work = tmp_path / "work" / "deep"
    work.mkdir(parents=True)
    archive = _archive(work / "bundle.tar.gz", members)
    _refused(archive, capsys, expected)
    assert not (tmp_path / "work" / "escape.json").exists()
    assert not (tmp_path / "escape.json").exists()
    assert not Path("/tmp/dradiag-escape.json").exists()
    assert list(private_tmp.iterdir()) == []  # the private dir was removed


def test_gzip_bomb_refused_by_ratio(tmp_path, private_tmp, capsys, monkeypatch):
    monkeypatch.setattr(bundle_read, "RATIO_GRACE_BYTES", 1024 * 1024)
    archive = _archive(tmp_path / "bomb.tar.gz", [("logs/a/b/c.log", b"\0" * (16 * 1024 * 1024))])
    assert archive.stat().st_size < 100_000
    _refused(archive, capsys, "compression bomb")
    assert list(private_tmp.iterdir()) == []


def test_total_size_cap(tmp_path, private_tmp, capsys, monkeypatch):
    monkeypatch.setattr(bundle_read, "MAX_TOTAL_BYTES", 1000)
    archive = _archive(tmp_path / "big.tar.gz", [("a.json", CLAIM), ("b.json", b" " * 2000)])
    _refused(archive, capsys, "unpacks to more than 1000 bytes")


def test_member_size_cap(tmp_path, private_tmp, capsys, monkeypatch):
    monkeypatch.setattr(bundle_read, "MAX_MEMBER_BYTES", 100)
    archive = _archive(tmp_path / "big.tar.gz", [("a.json", CLAIM)])
    _refused(archive, capsys, "larger than 100 bytes")


def test_member_count_cap(tmp_path, private_tmp, capsys, monkeypatch):
    monkeypatch.setattr(bundle_read, "MAX_MEMBERS", 3)
    archive = _archive(tmp_path / "many.tar.gz", [(f"{i}.json", CLAIM) for i in range(4)])
    _refused(archive, capsys, "more than 3 archive members")


def test_duplicate_member_refused(tmp_path, private_tmp, capsys):
    archive = _archive(tmp_path / "dup.tar.gz", [("a.json", CLAIM), ("./a.json", CLAIM)])
    _refused(archive, capsys, "appears twice")


def test_file_and_directory_clash_refused(tmp_path, private_tmp, capsys):
    archive = _archive(tmp_path / "clash.tar.gz", [("logs", b"x"), ("logs/a.json", CLAIM)])
    _refused(archive, capsys, "both a file and a directory")


def test_truncated_archive(tmp_path, private_tmp, capsys):
    whole = _archive(tmp_path / "whole.tar.gz", [("a.json", CLAIM * 200)])
    cut = tmp_path / "cut.tar.gz"
    cut.write_bytes(whole.read_bytes()[: whole.stat().st_size // 2])
    _refused(cut, capsys, "corrupt or truncated bundle archive")
    assert list(private_tmp.iterdir()) == []


def test_corrupt_archive(tmp_path, private_tmp, capsys):
    data = bytearray(_archive(tmp_path / "ok.tar.gz", [("a.json", CLAIM * 50)]).read_bytes())
    data[20:60] = b"\xff" * 40
    bad = tmp_path / "bad.tar.gz"
    bad.write_bytes(bytes(data))
    _refused(bad, capsys, "corrupt or truncated bundle archive")


def test_plain_archive_is_read(tmp_path, private_tmp, capsys):
    archive = _archive(tmp_path / "ok.tar.gz", [("resources/claims.json", CLAIM)])
    capsys.readouterr()
    code = run(["claim", "ml/c", "--from", str(archive), "-o", "json"])
    assert code in (0, 1, 4), capsys.readouterr().err
    assert list(private_tmp.iterdir()) == []


def test_unpack_refuses_names_directly(tmp_path):
    with pytest.raises(Exception, match="unsafe name"):
        bundle_read._safe_name("a\\..\\b", "x")
    assert str(bundle_read._safe_name("./a/./b", "x")) == "a/b"


def test_manifest_maps_collector_statuses_to_coverage():
    record = bundle_read.collection_record(
        {
            "collectors": [
                {"kind": "Pod", "status": "collected", "scope": "namespace ml"},
                {"kind": "DeviceTaintRule", "status": "absent", "reason": "not served"},
                {"kind": "Event", "status": "failed", "reason": "forbidden: list events"},
                {"kind": "Log", "status": "skipped"},
            ],
            "server": {"version": "1.34", "servedVersions": ["v1"]},
            "collectedAt": "2026-07-01T00:00:00Z",
        },
        ["Pod", "DeviceTaintRule", "Event", "Log", "Node"],
    )
    kinds = record["kinds"]
    assert kinds["Pod"] == {"coverage": "collected", "reason": None, "scope": "namespace ml"}
    assert kinds["DeviceTaintRule"]["coverage"] == "absent"
    assert kinds["Event"] == {
        "coverage": "unknown",
        "reason": "forbidden: list events",
        "scope": None,
    }
    assert kinds["Log"]["coverage"] == "unknown" and "skipped" in kinds["Log"]["reason"]
    assert kinds["Node"]["coverage"] == "unknown"  # not in the manifest: not collected
    assert record["source"]["serverVersion"] == "1.34"


def test_log_timestamps_stripped():
    text = "2026-07-22T02:41:10.552301Z I0722 02:41:10 x\n2026-07-22T02:41:11Z plain\nno stamp\n"
    assert bundle_read.strip_log_timestamps(text) == "I0722 02:41:10 x\nplain\nno stamp\n"


def test_unpacked_bundle_skips_symlinks_and_its_own_files(tmp_path, capsys):
    outside = tmp_path / "outside.json"
    outside.write_bytes(CLAIM.replace(b'"name": "c"', b'"name": "stolen"'))
    folder = tmp_path / "bundle"
    (folder / "resources").mkdir(parents=True)
    (folder / "manifest.json").write_text('{"schemaVersion": "dradiag.bundle/v1"}')
    (folder / "analysis.json").write_text('{"schemaVersion": "dradiag.diagnoses/v1", "items": []}')
    (folder / "resources" / "claims.json").write_bytes(CLAIM)
    (folder / "resources" / "link.json").symlink_to(outside)
    (folder / "node" / "n1").mkdir(parents=True)
    (folder / "node" / "n1" / "kubelet.log").write_text("journal\n")

    from dradiag.sources.manifests import load_snapshot

    snapshot = load_snapshot(str(folder))
    assert [c["metadata"]["name"] for c in snapshot.claims] == ["c"]
    assert list(snapshot.logs) == []
    assert snapshot.source.kind == "bundle"
    # Kinds the manifest does not list were not collected: unknown, not empty.
    assert {r.coverage.value for r in snapshot.coverage.values()} == {"unknown"}


def test_a_gzip_compressed_manifest_is_read_as_that_manifest(tmp_path, capsys):
    # `kubectl get resourceclaims -A -o json | gzip > claims.json.gz`: one file, no tar.
    packed = tmp_path / "claims.json.gz"
    packed.write_bytes(gzip.compress(CLAIM, mtime=0))
    capsys.readouterr()
    code = run(["claim", "ml/c", "--from", str(packed), "-o", "json"])
    captured = capsys.readouterr()
    assert code in (0, 1, 4), captured.err
    assert '"name": "c"' in captured.out


def test_a_gzip_file_holding_no_tar_says_how_a_compressed_manifest_is_named(tmp_path, capsys):
    packed = tmp_path / "claims.gz"
    packed.write_bytes(gzip.compress(CLAIM, mtime=0))
    _refused(packed, capsys, "a gzip-compressed manifest is read when its name ends in .yaml.gz")


def test_a_truncated_compressed_manifest_and_a_bomb_are_refused(tmp_path, capsys, monkeypatch):
    whole = gzip.compress(CLAIM * 500, mtime=0)
    cut = tmp_path / "claims.yaml.gz"
    cut.write_bytes(whole[: len(whole) // 2])
    _refused(cut, capsys, "corrupt or truncated gzip file")
    monkeypatch.setattr(bundle_read, "RATIO_GRACE_BYTES", 1024 * 1024)
    bomb = tmp_path / "bomb.json.gz"
    bomb.write_bytes(gzip.compress(b" " * (16 * 1024 * 1024), mtime=0))
    _refused(bomb, capsys, "compression bomb")
