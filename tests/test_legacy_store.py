"""A privacy store written by an earlier version (tests/data/store-54c8b3e, made at commit
54c8b3e: README there) is verified and republished byte for byte by this version. The
fixture is never modified: every test works on a copy."""
from __future__ import annotations

import hashlib
import shutil
from pathlib import Path

import pytest

FIXTURE = Path(__file__).parent / "data" / "store-54c8b3e"
RELEASE_ID = "2026Q4-legacy"


@pytest.fixture
def legacy_store(tmp_path) -> Path:
    """A copy of the committed store (tests may write to it: a lock, a new publication)."""
    return Path(shutil.copytree(FIXTURE / "store", tmp_path / "store"))


def published_sha256() -> dict[str, str]:
    """{path in the release folder: SHA-256} of every file the release wrote at 54c8b3e."""
    lines = (FIXTURE / "release.sha256").read_text().splitlines()
    return {name: sha for sha, name in (line.split("  ", 1) for line in lines)}


def is_data_file(name: str) -> bool:
    """The release's data: public and internal tables, version files and its configuration
    (the documents and summaries may change wording between versions; the data may not),
    but the files issue 34 changed on purpose: pseof (non-employment on the national
    all-industries row only) and the all folder's version_pseo.txt (every state's lines)."""
    changed = "pseof_" in name or name == "public/version_pseo.txt"
    return (name.endswith((".csv", ".txt")) or name == "internal/config.json") and not changed


def written_sha256(release: Path, name: str) -> str:
    """SHA-256 of the CSV or text a release writes now for the file `name` of 54c8b3e: the
    national files in all/, the data tables gzipped (hashed as gunzipped text), flows_state
    as Parquet (hashed as the CSV of its rows, which 54c8b3e wrote)."""
    from pseo_das.schemas.distribution import ALL_FOLDER, open_bytes, table_path
    from pseo_das.tasks.publication.flows_files import read_flows_state
    path = release / name
    if name == "internal/flows_state.csv":
        text = read_flows_state(release / "internal").to_csv(index=False)
        return hashlib.sha256(text.encode()).hexdigest()
    if name.startswith("public/") and name.count("/") == 1:
        path = release / "public" / ALL_FOLDER / Path(name).name
    if not path.is_file() and name.startswith("public/"):
        path = table_path(path.parent, path.name)
    with open_bytes(path) as handle:
        return hashlib.sha256(handle.read()).hexdigest()


def test_the_legacy_store_is_intact(legacy_store):
    from pseo_das.tasks.privacy.store_integrity import verify_store
    report = verify_store(legacy_store, check_objects=True)
    assert report.ok, report.message()
    assert (report.entries, report.objects_checked) == (24, 18)   # every object file re-hashed


@pytest.mark.slow
def test_a_store_of_54c8b3e_republishes_its_release_byte_for_byte(legacy_store, tmp_path):
    from pseo_das.cli import main
    out = tmp_path / "again"
    with pytest.raises(SystemExit) as stop:
        main(["republish", "--store", str(legacy_store), "--release", RELEASE_ID,
              "--out", str(out)])
    assert stop.value.code == 0
    expected = {name: sha for name, sha in published_sha256().items() if is_data_file(name)}
    assert len(expected) == 22
    written = {name: written_sha256(out, name) for name in expected}
    assert {name for name in expected if written[name] != expected[name]} == set()


@pytest.mark.slow
def test_a_new_release_of_the_same_inputs_and_seed_is_54c8b3e_s_byte_for_byte(tmp_path):
    """The measurement half too: the fixture's synthetic inputs made again, released by this
    version with the same seed and release id on a new store, give the data files 54c8b3e
    wrote (version_pseo.txt aside: it names the time of its release)."""
    from conftest import run_release
    from pseo_das.synth import write_synthetic
    inputs = tmp_path / "inputs"   # `pseo-das synth --graduates 1500`, as the README there says
    write_synthetic(inputs, graduates=1500, progress=lambda _: None)
    shutil.rmtree(inputs / "ipeds")   # 54c8b3e read the packaged IPEDS files, and flagged
    as_then = tmp_path / "as_then.toml"
    as_then.write_text('[cells]\nframe_not_in_ipeds = "flag"\n')
    assert run_release(inputs, tmp_path / "release", "c3" * 32,
                       f"sqlite:///{tmp_path / 'audit' / 'mlflow.db'}", RELEASE_ID,
                       ("--config", str(as_then))) == 0
    expected = {name: sha for name, sha in published_sha256().items()
                if is_data_file(name) and not name.endswith("version_pseo.txt")}
    assert len(expected) == 17
    written = {name: written_sha256(tmp_path / "release", name) for name in expected}
    assert {name for name in expected if written[name] != expected[name]} == set()
