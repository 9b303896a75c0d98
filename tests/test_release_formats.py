"""The session's releases (conftest.py) in the formats of issue 34 items 3 and 4: the Data
Package validated by `frictionless`, the Parquet copies holding the published CSV,
flows_state as Parquet, a rerun's identical files hard-linked to the first run's, and the
size of a release folder measured as docs/reference/distribution.md measures it."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.csv as pa_csv
import pytest

from conftest import public_table
from pseo_das.schemas.table_package import public_table_fields
from pseo_das.tasks.publication.flows_files import read_flows_state
from pseo_das.tasks.publication.parquet_files import parquet_name
from test_table_package import FRICTIONLESS, assert_parquet_holds_csv

pytestmark = pytest.mark.slow  # reads the session's releases

ROOT = Path(__file__).resolve().parents[1]
VALIDATED_ROWS = 20_000     # rows of each table frictionless reads (pure Python: ~10^4 rows/s)
SIZE_LIMIT_MB = 120


def test_the_datapackage_validates_with_frictionless(releases):
    """`frictionless validate` on all/datapackage.json, as a user runs it: every table's
    columns, types, code lists and flags (the first VALIDATED_ROWS rows of each; every row
    is checked by the layout validator and by the Parquet comparison below)."""
    root, _ = releases
    descriptor = root / "a" / "public" / "all" / "datapackage.json"
    done = subprocess.run([str(FRICTIONLESS), "validate", "--json", "--limit-rows",
                           str(VALIDATED_ROWS), str(descriptor)],
                          capture_output=True, text=True, timeout=1800)
    report = json.loads(done.stdout)
    assert report["valid"], json.dumps(report["tasks"], indent=1)[:3000]
    assert done.returncode == 0
    assert sorted(t["name"] for t in report["tasks"]) == \
        ["pseo_all_institutions", "pseoe_all", "pseof_all", "pseoh_all"]
    package = json.loads(descriptor.read_text())
    assert "not part of the Census Bureau's PSEO distribution" in package["description"]
    assert [r["path"] for r in package["resources"]] == \
        ["pseoe_all.csv.gz", "pseof_all.csv.gz", "pseoh_all.csv.gz", "pseo_all_institutions.csv"]


def test_the_parquet_copies_hold_the_published_tables(releases):
    root, _ = releases
    for csv_name in public_table_fields():
        copy = root / "a" / "public" / "all" / "parquet" / parquet_name(csv_name)
        assert_parquet_holds_csv(copy, public_table(root / "a", csv_name))


def test_flows_state_is_compressed_parquet(releases):
    root, _ = releases
    internal = root / "a" / "internal"
    assert not (internal / "flows_state.csv").exists()
    state = read_flows_state(internal)
    assert len(state) > 0 and (state["corrected_count"] >= 0).all()
    sample = state.head(20_000)
    assert csv_size(sample) == len(sample.to_csv(index=False).encode())   # pandas' CSV text
    assert (internal / "flows_state.parquet").stat().st_size < csv_size(state) / 10


def csv_size(frame: pd.DataFrame) -> int:
    """The bytes of `frame` as CSV text (pandas' `to_csv(index=False)`: its codes and counts
    need no quotes), written by Arrow's CSV writer: 1.3 instead of 10 CPU s for the 6.6
    million rows of the tests' flows state."""
    sink = pa.BufferOutputStream()
    pa_csv.write_csv(pa.Table.from_pandas(frame, preserve_index=False), sink,
                     pa_csv.WriteOptions(quoting_style="none", quoting_header="none"))
    return sink.getvalue().size


def test_a_rerun_publishes_its_identical_files_as_hard_links(releases):
    """a_again reran a (same seed, release id, store): every file with a's bytes is a's
    file (one inode), the large ones included; b (another seed) shares none of its data."""
    root, _ = releases
    first, again = (json.loads((root / name / "internal" / "manifest.json").read_text())["files"]
                    for name in ("a", "a_again"))
    same = {name for name, sha in again.items() if first.get(name) == sha}
    assert {"public/all/pseof_all.csv.gz", "internal/flows_state.parquet",
            "public/all/parquet/pseof_all.parquet"} <= same
    for name in again:
        assert os.path.samefile(root / "a" / name, root / "a_again" / name) == (name in same), name
    assert not os.path.samefile(root / "a" / "public/all/pseof_all.csv.gz",
                                root / "b" / "public/all/pseof_all.csv.gz")


def test_the_release_folder_size(releases):
    """The size of a release folder, measured by benchmarks/release_sizes.py (the command
    docs/reference/distribution.md quotes), within the target."""
    root, _ = releases
    done = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "release_sizes.py"),
                           str(root / "a"), "--limit-mb", str(SIZE_LIMIT_MB)],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    whole = [line for line in done.stdout.splitlines() if "whole folder" in line]
    total = int(whole[0].split()[0].replace(",", ""))
    files = {(s.st_dev, s.st_ino): s.st_size
             for p in (root / "a").rglob("*") if p.is_file() for s in [p.stat()]}
    assert total == sum(files.values())   # a file linked under two names counts once
    assert total < SIZE_LIMIT_MB * 1e6
    assert "internal/flows_state.parquet" in done.stdout
