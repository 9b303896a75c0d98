"""The replay check's comparison of files (tasks/audit/replay.compare_replay): a gzipped table
that another gzip build compressed into other bytes is the same table, and so is a Parquet
file holding the same columns and rows in other bytes (flows_state.parquet written from its
code columns' text by earlier releases, from their codes since): both pass with a note; any
other difference fails, naming the file."""
from __future__ import annotations

import gzip
from pathlib import Path

import pyarrow as pa
import pytest

from pseo_das.schemas.distribution import open_output
from pseo_das.tasks.audit.audit_target import AuditedRelease
from pseo_das.tasks.audit.replay import compare_replay, parquet_difference, row_blocks
from pseo_das.tasks.publication import release_files
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


STATE = "internal/flows_state.parquet"
TEXT = pa.schema([("institution", pa.string()), ("state", pa.string()), ("count", pa.int64())])
CODED = pa.schema([(f.name, pa.dictionary(pa.int32(), f.type)) if f.type == pa.string() else f
                   for f in TEXT])


def coded_pieces(rows: int = 23, piece: int = 4) -> list[pa.Table]:
    """Rows in pieces whose code columns are dictionary-coded, each piece with a dictionary
    of its own (as flows_state_rows makes them)."""
    return [pa.table({"institution": pa.array([f"{(7 * i) % 5:08d}" for i in range(start, stop)]
                                              ).dictionary_encode(),
                      "state": pa.array([f"{i % 3:02d}" for i in range(start, stop)]).dictionary_encode(),
                      "count": pa.array(range(start, stop), pa.int64())}, schema=CODED)
            for start, stop in ((s, min(s + piece, rows)) for s in range(0, rows, piece))]


def state_file(root: Path, pieces: list[pa.Table], schema: pa.Schema, group_rows: int,
               monkeypatch) -> Path:
    """A release folder whose only file is internal/flows_state.parquet of the pieces,
    written as `schema` says (CODED: from the codes; TEXT: as text) in row groups of
    `group_rows` rows."""
    monkeypatch.setattr(release_files, "PARQUET_ROW_GROUP_ROWS", group_rows)
    (root / "internal").mkdir(parents=True)
    with release_files.ParquetTableWriter(root / STATE, schema) as writer:
        for piece in pieces:
            writer.write(piece)
    return root


def test_a_parquet_table_in_other_bytes_is_the_same_table_and_passes_with_a_note(tmp_path,
                                                                                 monkeypatch):
    release = state_file(tmp_path / "release", coded_pieces(), TEXT, 5, monkeypatch)
    replay = state_file(tmp_path / "replay", coded_pieces(), CODED, 3, monkeypatch)
    assert (release / STATE).read_bytes() != (replay / STATE).read_bytes()   # other bytes
    for rows in (1, 2, 4, 7, 100):       # blocks compared across the files' row groups
        assert parquet_difference(release / STATE, replay / STATE, rows) is None
    result = compare_replay(audited(release), replay, {}, {}, [])
    assert result.status == PASSED, result.findings
    assert result.figures["internal files compared"] == 1
    assert result.figures["internal files identical"] == 0
    assert "and 1 of 1 internal: flows_state.parquet" in result.summary
    assert any(STATE in note and "same table" in note for note in result.notes)


def one_value_changed(pieces):
    changed = pieces[3].set_column(2, "count", pa.array([9, 9, 9, 9], pa.int64()))
    return pieces[:3] + [changed] + pieces[4:], "first difference at row 13"   # 12 was 12


def one_row_fewer(pieces):
    return pieces[:-1] + [pieces[-1].slice(0, 2)], "the replay has fewer rows (from row 23)"


def another_column_type(pieces):
    schema = CODED.set(2, pa.field("count", pa.int32()))
    return [piece.cast(schema) for piece in pieces], "different columns"


@pytest.mark.parametrize("change", [one_value_changed, one_row_fewer, another_column_type])
def test_a_parquet_file_of_another_table_fails_saying_where(tmp_path, monkeypatch, change):
    replayed, where = change(coded_pieces())
    release = state_file(tmp_path / "release", coded_pieces(), TEXT, 5, monkeypatch)
    replay = state_file(tmp_path / "replay", replayed, replayed[0].schema, 3, monkeypatch)
    for rows in (1, 2, 4, 7, 100):
        assert parquet_difference(release / STATE, replay / STATE, rows) == where
    result = compare_replay(audited(release), replay, {}, {}, [])
    assert result.status == FAILED
    assert result.findings == [f"{STATE}: differs from the replay ({where}; "
                               f"{(release / STATE).stat().st_size:,} bytes published, "
                               f"{(replay / STATE).stat().st_size:,} replayed)"]


class UnevenBatches:
    """A Parquet file as `row_blocks` reads it, whose batches are cut unevenly (pyarrow's
    `iter_batches(n)` promises at most n rows a batch, so two files' need not line up)."""

    def __init__(self, table: pa.Table, cuts: list[int]):
        self.table, self.cuts, self.schema_arrow = table, cuts, table.schema

    def iter_batches(self, rows: int):
        edges = [0] + [c for c in self.cuts if c < self.table.num_rows] + [self.table.num_rows]
        for start, stop in zip(edges, edges[1:]):
            yield from self.table.slice(start, stop - start).to_batches()


def test_the_compared_blocks_hold_as_many_rows_however_the_batches_are_cut():
    table = pa.concat_tables(coded_pieces()).cast(TEXT)
    for cuts in ([1, 2, 6, 7, 15, 16], [5, 10, 15, 20]):
        for rows in (1, 2, 4, 7, 100):
            blocks = list(row_blocks(UnevenBatches(table, cuts), rows))
            assert [b.num_rows for b in blocks[:-1]] == [rows] * (len(blocks) - 1)
            assert pa.concat_tables(blocks).equals(table)
