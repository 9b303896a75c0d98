"""The replay check's comparison of files (tasks/audit/replay.compare_replay): a gzipped table
that another gzip build compressed into other bytes is the same table, and passes with a
note; any other difference fails, naming the file."""
from __future__ import annotations

import gzip
from pathlib import Path

import pytest

from pseo_das.schemas.distribution import open_output
from pseo_das.tasks.audit.audit_target import AuditedRelease
from pseo_das.tasks.audit.replay import compare_replay
from pseo_das.tasks.audit.verification import FAILED, PASSED

TABLE = b"agg_level_pseo,institution,y1_p50_earnings\n26,00001,41000\n26,00002,\n" * 200
NOTES = "public/release_notes.md"


def published(root: Path, table: bytes, compressor: str) -> Path:
    """A release folder with one gzipped table (compressed by the release's writer, or by
    Python's zlib as another build would) and one plain file."""
    path = root / "public" / "all" / "pseoe_all.csv.gz"
    path.parent.mkdir(parents=True)
    if compressor == "release":
        with open_output(path) as out:
            out.write(table)
    else:
        path.write_bytes(gzip.compress(table, compresslevel=9, mtime=0))
    (root / NOTES).write_text("release notes\n")
    return root


def audited(release_dir: Path) -> AuditedRelease:
    return AuditedRelease(run_id="r", tracking_uri="sqlite:///unused", release_dir=release_dir,
                          release_id="R1", run_status="FINISHED", params={}, tags={},
                          metrics={}, manifest={}, given_as="release folder")


def compare(tmp_path: Path, replayed_table: bytes, compressor: str):
    release = published(tmp_path / "release", TABLE, "release")
    replay = published(tmp_path / "replay", replayed_table, compressor)
    return compare_replay(audited(release), replay, {}, {}, [])


def test_the_same_compressor_reproduces_every_file_byte_for_byte(tmp_path):
    result = compare(tmp_path, TABLE, "release")
    assert result.status == PASSED
    assert result.figures["public files identical"] == 2
    assert result.figures["public files identical once decompressed"] == 0
    assert not result.notes


def test_another_gzip_build_gives_other_bytes_of_the_same_table_and_passes_with_a_note(tmp_path):
    release, replay = tmp_path / "release", tmp_path / "replay"
    result = compare(tmp_path, TABLE, "zlib")
    name = "public/all/pseoe_all.csv.gz"
    assert (release / name).read_bytes() != (replay / name).read_bytes()   # other bytes
    assert result.status == PASSED
    assert result.figures["public files identical"] == 1
    assert result.figures["public files identical once decompressed"] == 1
    assert "1 of 2 public files reproduced byte for byte and 1 the same once decompressed" \
        in result.summary
    assert any(name in note and "another build of the compressor" in note
               for note in result.notes)


@pytest.mark.parametrize("compressor", ["release", "zlib"])
def test_a_different_table_fails_naming_the_file_and_line(tmp_path, compressor):
    changed = TABLE.replace(b"41000", b"41001", 1)
    result = compare(tmp_path, changed, compressor)
    assert result.status == FAILED
    assert result.findings == [
        f"public/all/pseoe_all.csv.gz: differs from the replay (first difference at line 2; "
        f"{(tmp_path / 'release/public/all/pseoe_all.csv.gz').stat().st_size:,} bytes "
        f"published, {(tmp_path / 'replay/public/all/pseoe_all.csv.gz').stat().st_size:,} "
        "replayed)"]


def test_a_plain_file_with_other_bytes_fails(tmp_path):
    release = published(tmp_path / "release", TABLE, "release")
    replay = published(tmp_path / "replay", TABLE, "release")
    (replay / NOTES).write_text("release notes, other\n")
    result = compare_replay(audited(release), replay, {}, {}, [])
    assert result.status == FAILED
    assert [f.split(":")[0] for f in result.findings] == [NOTES]
