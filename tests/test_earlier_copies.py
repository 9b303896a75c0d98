"""A release's files identical to an earlier release's beside it are published as hard links
to them (tasks/publication/earlier_copies.py, through release_files.publish): same bytes,
one copy on disk; never to a file changed since its release; a copy, with the reason, when
the earlier release is on another filesystem."""
from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from pseo_das.schemas.written_hashes import read_sha256
from pseo_das.tasks.publication.earlier_copies import link_earlier_copies
from pseo_das.tasks.publication.release_files import publish

FILES = {"public/all/pseof_all.csv.gz": b"pseof rows\n" * 100,
         "internal/flows_state.parquet": b"PAR1 state rows PAR1",
         "public/release_notes.md": b"release 1\n"}


def release_folder(folder: Path, files: dict[str, bytes]) -> Path:
    """A release folder holding `files` and its manifest."""
    for name, content in files.items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_bytes(content)
    manifest = {"release_id": folder.name,
                "files": {name: read_sha256(folder / name) for name in sorted(files)}}
    (folder / "internal" / "manifest.json").write_text(json.dumps(manifest))
    return folder


def test_a_rerun_publishes_its_identical_files_as_hard_links(tmp_path):
    releases = tmp_path / "releases"
    first = release_folder(releases / "20261125T000000Z", FILES)
    rerun = dict(FILES, **{"public/release_notes.md": b"release 2\n"})
    staging = release_folder(releases / ".20261126T000000Z.staging-1", rerun)
    out = publish(staging, releases / "20261126T000000Z")
    for name in ("public/all/pseof_all.csv.gz", "internal/flows_state.parquet"):
        assert os.path.samefile(out / name, first / name)
        assert (out / name).read_bytes() == FILES[name]
    assert not os.path.samefile(out / "public/release_notes.md", first / "public/release_notes.md")
    assert (out / "public/release_notes.md").read_bytes() == b"release 2\n"
    assert sorted(p.name for p in out.rglob(".*")) == []            # no temporary link left
    # the first release deleted: the second keeps whole files
    for name in FILES:
        (first / name).unlink()
    assert (out / "public/all/pseof_all.csv.gz").read_bytes() == FILES["public/all/pseof_all.csv.gz"]


def test_a_file_changed_since_its_release_is_not_linked_to(tmp_path):
    releases = tmp_path / "releases"
    first = release_folder(releases / "r1", FILES)
    (first / "internal/flows_state.parquet").write_bytes(b"PAR1 changed! rows PAR1")  # same size
    staging = release_folder(releases / ".r2.staging", FILES)
    found = link_earlier_copies(staging, releases / "r2")
    assert found.files == 2 and found.releases == {"r1"}     # the pseof file and the notes
    assert not os.path.samefile(staging / "internal/flows_state.parquet",
                                first / "internal/flows_state.parquet")
    assert (staging / "internal/flows_state.parquet").read_bytes() == \
        FILES["internal/flows_state.parquet"]


def test_an_earlier_release_on_another_filesystem_is_copied_and_says_why(tmp_path):
    other = Path("/dev/shm")
    if not other.is_dir() or other.stat().st_dev == tmp_path.stat().st_dev:
        pytest.skip("no second filesystem (/dev/shm) here")
    elsewhere = other / f"pseo-das-test-{os.getpid()}"
    try:
        release_folder(elsewhere / "r1", FILES)
        releases = tmp_path / "releases"
        releases.mkdir()
        (releases / "r1").symlink_to(elsewhere / "r1")      # the earlier release, mounted elsewhere
        staging = release_folder(releases / ".r2.staging", FILES)
        found = link_earlier_copies(staging, releases / "r2")
        assert found.files == 0 and len(found.not_linked) == len(FILES)
        assert "cannot hard-link to r1 (Invalid cross-device link)" in found.summary()
        assert all((staging / name).read_bytes() == content for name, content in FILES.items())
    finally:
        shutil.rmtree(elsewhere, ignore_errors=True)
