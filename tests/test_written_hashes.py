"""Outputs hashed as they are written (schemas/written_hashes.py): the recorded SHA-256 of a
gzipped table, a plain one and a Parquet file is the SHA-256 of the file on disk; a file
changed after it was written is read and hashed again."""
from __future__ import annotations

import hashlib
import os

import pandas as pd
import pyarrow as pa

from pseo_das.schemas.written_hashes import file_sha256, recorded_sha256
from pseo_das.tasks.publication.release_files import (ParquetTableWriter, fingerprints,
                                                      write_code_table)

TABLE = pd.DataFrame({"agg_level_pseo": [26, 28] * 5000,
                      "institution": [f"{i:08d}" for i in range(10_000)]})


def on_disk(path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_the_recorded_hash_is_the_sha256_of_the_file_on_disk(tmp_path):
    gz, plain, parquet = tmp_path / "t.csv.gz", tmp_path / "t.csv", tmp_path / "t.parquet"
    write_code_table(TABLE, gz)
    write_code_table(TABLE, plain)
    with ParquetTableWriter(parquet, pa.schema([("agg_level_pseo", pa.int64()),
                                                ("institution", pa.string())])) as writer:
        writer.write(pa.Table.from_pandas(TABLE, preserve_index=False))
    for path in (gz, plain, parquet):
        assert recorded_sha256(path) == on_disk(path) == file_sha256(path)
    assert fingerprints(tmp_path) == {p.name: on_disk(p) for p in (plain, gz, parquet)}


def test_a_file_changed_after_it_was_written_is_hashed_again(tmp_path):
    """Negative control: the record is not used once the file is not as written (same
    size, other bytes, another modification time)."""
    path = tmp_path / "t.csv"
    write_code_table(TABLE, path)
    written = recorded_sha256(path)
    data = bytearray(path.read_bytes())
    data[-2:-1] = b"7"         # the last row ends in 9
    path.write_bytes(bytes(data))
    stat = path.stat()
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000))
    assert recorded_sha256(path) is None
    assert file_sha256(path) == on_disk(path) != written
    assert recorded_sha256(tmp_path / "never_written.csv") is None
