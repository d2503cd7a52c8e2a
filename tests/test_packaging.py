"""What the wheel carries beside the code: the docs pages, JSON Schemas, docs/rbac.yaml, the
rules and the samples — read through ``importlib.resources`` (``dradiag.packaged``)."""

from __future__ import annotations

import tomllib
from pathlib import Path

from dradiag import packaged

REPO = Path(__file__).resolve().parents[1]


def test_pyproject_ships_docs_and_rules_inside_the_package():
    build = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["hatch"]["build"]
    force = build["targets"]["wheel"]["force-include"]
    assert force["docs"] == f"dradiag/{packaged.PACKAGED_DOCS}"
    assert force["rules"] == "dradiag/_rules"
    assert build["targets"]["wheel"]["packages"] == ["dradiag"]  # samples/ and index.yaml


def test_the_package_resources_hold_the_docs_schemas_and_rbac():
    for parts in (
        ("rbac.yaml",),
        ("schema", "diagnosis.schema.json"),
        ("schema", "bundle-manifest.schema.json"),
        ("phases.md",),
        ("troubleshooting.md",),
        ("rules.md",),
        ("commands", "claim.md"),
        ("img", "claim.svg"),
    ):
        assert packaged.docs_file(*parts).is_file(), parts
    schemas = [e.name for e in packaged.docs_file("schema").iterdir()]
    assert len([s for s in schemas if s.endswith(".schema.json")]) >= 8


def test_an_installed_copy_wins_over_the_checkout(tmp_path, monkeypatch):
    installed = tmp_path / "dradiag"
    (installed / packaged.PACKAGED_DOCS).mkdir(parents=True)
    (installed / packaged.PACKAGED_DOCS / "rbac.yaml").write_text("kind: ClusterRole\n")
    monkeypatch.setattr(packaged.resources, "files", lambda _name: installed)
    assert packaged.docs_file("rbac.yaml").read_text() == "kind: ClusterRole\n"


def test_the_samples_ship_with_their_index():
    from importlib import resources

    samples = resources.files("dradiag").joinpath("samples")
    assert samples.joinpath("index.yaml").is_file()
    assert samples.joinpath("healthy-mig-claim", "claims.yaml").is_file()
