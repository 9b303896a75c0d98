"""The public files as distributed (schemas/distribution.py): deterministic gzip, names and
folders, the readers' helpers, the partners files and the labelled workbook."""
from __future__ import annotations

import gzip
import shutil
import subprocess
import sys
import time
from datetime import datetime
from fractions import Fraction

import pandas as pd
import pytest

from pseo_das.schemas.distribution import (GZIP_BLOCK_BYTES, GZIP_BLOCKS_AHEAD, TableFormat,
                                           folder_of, open_output, open_table,
                                           published_table, table_path)
from pseo_das.schemas.pseo_layout import Product
from pseo_das.tasks.publication.partners_files import (coverage_awards, partners_files,
                                                       partners_text, statewide_coverage)
from pseo_das.tasks.publication.release_files import CodeTableWriter, write_code_table

TABLE = pd.DataFrame({"agg_level_pseo": [26, 28], "institution": ["08", "00134500"],
                      "y1_grads_emp": pd.array([12, None], dtype="Int64")})
CSV = b"agg_level_pseo,institution,y1_grads_emp\n26,08,12\n28,00134500,\n"


def test_gzipped_tables_are_the_same_bytes_on_every_run(tmp_path):
    """Fixed level, header time 0 and no file name: two writes a second apart, under
    different names, give the same bytes, which gunzip to the plain CSV."""
    first, second = tmp_path / "a" / "pseoe_all.csv.gz", tmp_path / "b" / "pseoe_co.csv.gz"
    first.parent.mkdir(), second.parent.mkdir()
    write_code_table(TABLE, first)
    time.sleep(1.1)
    write_code_table(TABLE, second)
    assert first.read_bytes() == second.read_bytes()
    head = first.read_bytes()[:10]
    assert head[:3] == b"\x1f\x8b\x08" and head[3] == 0        # deflate, no FNAME / FEXTRA
    assert head[4:8] == b"\0\0\0\0"                               # MTIME 0
    assert gzip.decompress(first.read_bytes()) == CSV
    if shutil.which("gzip"):                                      # as a user gunzips it
        assert subprocess.run(["gzip", "-dc", str(first)], capture_output=True,
                              check=True).stdout == CSV
    plain = tmp_path / "pseoe_all.csv"
    write_code_table(TABLE, plain)
    assert plain.read_bytes() == CSV


def test_a_large_gzipped_table_is_the_same_bytes_however_its_rows_arrive(tmp_path):
    """ISA-L is fed blocks of GZIP_BLOCK_BYTES whatever the writes: a table of several
    blocks written whole, and in uneven pieces, gives the same bytes twice; Python's gzip,
    pandas and zcat read back the CSV."""
    rows = 3 * GZIP_BLOCK_BYTES // 20
    table = pd.DataFrame({"agg_level_pseo": 26, "institution": [f"{i:08d}" for i in range(rows)],
                          "y1_grads_emp": pd.array(range(rows), dtype="Int64")})
    whole, pieces = tmp_path / "whole.csv.gz", tmp_path / "pieces.csv.gz"
    write_code_table(table, whole)
    with CodeTableWriter(pieces, list(table.columns)) as writer:
        for start, stop in [(0, 7), (7, 50_001), (50_001, 50_002), (50_002, rows)]:
            writer.write(table.iloc[start:stop])
    assert whole.read_bytes() == pieces.read_bytes()
    text = gzip.decompress(whole.read_bytes())
    assert len(text) > 2 * GZIP_BLOCK_BYTES
    assert text == table.to_csv(index=False, lineterminator="\n").encode()
    pd.testing.assert_frame_equal(pd.read_csv(whole, dtype={"institution": str}),
                                  table.astype({"y1_grads_emp": "int64"}))
    if shutil.which("zcat"):
        assert subprocess.run(["zcat", str(whole)], capture_output=True,
                              check=True).stdout == text


def test_names_folders_and_the_readers_helpers(tmp_path):
    assert folder_of("pseoe_all.csv") == folder_of("pseo_all_partners.txt") == "all"
    assert folder_of("pseof_co.csv") == folder_of("pseo_co_institutions.csv") == "co"
    with pytest.raises(ValueError, match="version_pseo.txt"):
        folder_of("version_pseo.txt")
    public = tmp_path / "public"
    assert published_table(public, "pseoe_all.csv", TableFormat.CSV_GZ) == \
        public / "all" / "pseoe_all.csv.gz"
    assert published_table(public, "pseof_co.csv", "csv") == public / "co" / "pseof_co.csv"
    with pytest.raises(FileNotFoundError, match="all/pseoe_all.csv.gz, all/pseoe_all.csv"):
        table_path(public, "pseoe_all.csv")
    (public / "all").mkdir(parents=True)
    write_code_table(TABLE, public / "all" / "pseoe_all.csv.gz")
    found = table_path(public, "pseoe_all.csv")
    assert found == public / "all" / "pseoe_all.csv.gz"
    with open_table(found) as text:
        assert text.read() == CSV.decode()
    assert table_path(public / "all", "pseoe_all.csv") == found      # a folder of downloads
    pd.testing.assert_frame_equal(pd.read_csv(found, dtype=str, keep_default_na=False),
                                  pd.read_csv(public / "all" / "pseoe_all.csv.gz", dtype=str,
                                              keep_default_na=False))


def test_partners_files_follow_the_schema_sample():
    """Lines: FIPS code and state name; share of statewide graduates covered (2015
    estimate); the data providers (schema, Metadata: the Colorado sample)."""
    text = partners_text("08", (Fraction(72, 100), 2015), ["Colorado Department of Higher Education"])
    assert text == ("08 Colorado\n72% of statewide graduates covered (2015 estimate)\n"
                    "Colorado Department of Higher Education\n")
    files = partners_files(["26", "08"], {"08": (Fraction(1, 3), 2015)}, {"26": ["A", "B"]})
    assert list(files) == ["co/pseo_co_partners.txt", "mi/pseo_mi_partners.txt",
                           "all/pseo_all_partners.txt"]
    assert files["mi/pseo_mi_partners.txt"].splitlines() == [
        "26 Michigan", "share of statewide graduates covered not available (no IPEDS "
        "completions for the state)", "A", "B"]
    assert files["all/pseo_all_partners.txt"] == files["co/pseo_co_partners.txt"] + \
        files["mi/pseo_mi_partners.txt"]
    assert files["co/pseo_co_partners.txt"].splitlines()[1].startswith("33% ")


def test_statewide_coverage_is_the_share_of_ipeds_graduates_at_the_release_institutions():
    """Awards of 2015 (the latest earlier year when 2015 has none) of the release's
    institutions in the state over those of every institution of the state; the state of
    an OPEID outside the release comes from label_institution.csv."""
    awards = pd.DataFrame({
        "institution": ["00134500", "00134500", "00135100", "00224100", "00224100"],
        "degree_level": ["05"] * 5, "grad_year": [2015, 2016, 2015, 2013, 2014],
        "cipcode": ["52.0201"] * 5, "reported_cipcode": ["52.0201"] * 5,
        "awards": [30, 500, 90, 7, 10]})
    release = {"00134500": "08", "00224100": "26"}            # 00135100: Colorado, not released
    assert statewide_coverage(awards, release) == {"08": (Fraction(30, 120), 2015),
                                                   "26": (Fraction(1), 2014)}
    assert statewide_coverage(None, release) == {}
    summed = coverage_awards(pd.concat([awards, awards.assign(cipcode="11.0101")]))
    assert len(summed) == 5 and statewide_coverage(summed, release) == {     # each award twice
        "08": (Fraction(60, 240), 2015), "26": (Fraction(1), 2014)}


def test_the_labelled_workbook(tmp_path):
    """A label column after each code column, from the schema's label files; codes stay
    text, measures are numbers, empty stays empty; a variables sheet; the same bytes twice."""
    openpyxl = pytest.importorskip("openpyxl")
    from pseo_das.tasks.publication.labelled_workbook import write_labelled_workbook
    row = {"agg_level_pseo": "40", "inst_level": "I", "institution": "00134500",
           "degree_level": "05", "cip_level": "2", "cipcode": "52", "grad_cohort": "0000",
           "grad_cohort_years": "3", "geo_level": "N", "geography": "00", "ind_level": "A",
           "industry": "00"}
    frame = pd.DataFrame([row | {"y1_p50_earnings": "51000", "y1_grads_earn": ""}])
    paths = [tmp_path / "a" / "pseoe_all.xlsx", tmp_path / "b" / "pseoe_all.xlsx"]
    for path in paths:
        path.parent.mkdir()
        write_labelled_workbook(frame, path, Product.PSEOE, datetime(2026, 10, 1))
        time.sleep(1.1)
    assert paths[0].read_bytes() == paths[1].read_bytes()
    book = openpyxl.load_workbook(paths[0], read_only=True)
    assert book.sheetnames == ["pseoe_all", "variables"]
    header, values = [list(r) for r in book["pseoe_all"].iter_rows(values_only=True)]
    shown = dict(zip(header, values))
    assert header[:4] == ["agg_level_pseo", "agg_level_pseo_label", "inst_level", "inst_level_label"]
    assert shown["agg_level_pseo_label"] == "Degree Level * CIP 2-digit * Institution ID"
    assert shown["institution"] == "00134500"                      # text, leading zeros kept
    assert shown["institution_label"] == "Adams State University"
    assert shown["degree_level_label"] == "Baccalaureate"
    assert shown["cipcode_label"].startswith("Business, Management, Marketing")
    assert shown["geography_label"] == "National (50 States + DC)"
    assert shown["industry_label"] == "All NAICS Sectors"
    assert shown["y1_p50_earnings"] == 51000 and shown["y1_grads_earn"] is None
    variables = dict(list(book["variables"].iter_rows(values_only=True))[1:])
    assert variables["institution"] == "Place of the institution"
    assert variables["cipcode_label"] == "Label of cipcode (schema label files)"


def test_a_workbook_of_more_rows_than_a_sheet_holds_continues_on_more_sheets(tmp_path,
                                                                              monkeypatch):
    """A national pseoe_all can pass a worksheet's 1,048,576 rows: its rows continue on
    `pseoe_all (2)`, ... (here with sheets of 4 rows + the header line), each sheet with
    the header line, every row once and in order."""
    openpyxl = pytest.importorskip("openpyxl")
    from pseo_das.tasks.publication import labelled_workbook
    monkeypatch.setattr(labelled_workbook, "XLSX_ROWS", 5)
    assert labelled_workbook.data_sheets("t", 0) == [("t", 0, 0)]
    row = {"agg_level_pseo": "40", "inst_level": "I", "institution": "00134500",
           "degree_level": "05", "cip_level": "2", "cipcode": "52", "grad_cohort": "0000",
           "grad_cohort_years": "3", "geo_level": "N", "geography": "00", "ind_level": "A",
           "industry": "00"}
    frame = pd.DataFrame([row | {"y1_p50_earnings": str(40000 + i)} for i in range(10)])
    path = tmp_path / "pseoe_all.xlsx"
    assert labelled_workbook.write_labelled_workbook(frame, path, Product.PSEOE,
                                                     datetime(2026, 10, 1)) == 10
    book = openpyxl.load_workbook(path, read_only=True)
    assert book.sheetnames == ["pseoe_all", "pseoe_all (2)", "pseoe_all (3)", "variables"]
    earnings = []
    for name, rows in zip(book.sheetnames[:3], (4, 4, 2)):
        header, *values = [list(r) for r in book[name].iter_rows(values_only=True)]
        assert header[0] == "agg_level_pseo" and len(values) == rows
        earnings += [dict(zip(header, v))["y1_p50_earnings"] for v in values]
    assert earnings == list(range(40000, 40010))
    # turned into cells in blocks (memory of one block): blocks that end inside a sheet and
    # at its end, handed over as a frame or as blocks, give the same bytes
    for block_rows in (3, 4):
        monkeypatch.setattr(labelled_workbook, "WORKBOOK_BLOCK_ROWS", block_rows)
        for given in (frame, [frame.iloc[:0], *labelled_workbook._blocks(frame)]):
            again = tmp_path / f"{block_rows}-{type(given).__name__}" / "pseoe_all.xlsx"
            again.parent.mkdir()
            labelled_workbook.write_labelled_workbook(given, again, Product.PSEOE,
                                                      datetime(2026, 10, 1))
            assert again.read_bytes() == path.read_bytes()


def test_the_configuration_switch(tmp_path):
    """[publication] format: "csv.gz" by default (left out of config.json, so the hashes
    of earlier configurations stay), "csv" for plain CSV; anything else refused by name."""
    from pseo_das.config import ConfigError, load_config
    default = load_config()
    assert default.publication.table_format is TableFormat.CSV_GZ
    assert "publication" not in default.model_dump()
    plain = tmp_path / "plain.toml"
    plain.write_text('[publication]\nformat = "csv"\ndata_providers = { "08" = ["CDHE"] }\n')
    chosen = load_config(plain)
    assert chosen.publication.table_format is TableFormat.CSV
    assert chosen.model_dump()["publication"]["format"] == "csv"
    bad = tmp_path / "bad.toml"
    bad.write_text('[publication]\nformat = "zip"\n')
    with pytest.raises(ConfigError, match="publication.format = 'zip'"):
        load_config(bad)
    bad.write_text('[publication]\ndata_providers = { "99" = ["x"] }\n')
    with pytest.raises(ConfigError, match="99 not the 2-digit FIPS code"):
        load_config(bad)


def test_a_failure_in_the_compressing_thread_is_raised_by_the_stream(tmp_path):
    """The blocks are compressed and written by a thread: a write that fails there (here
    the file closed under the stream) is raised by the stream's next write or its close."""
    out = open_output(tmp_path / "t.csv.gz")
    out._raw.close()
    with pytest.raises(ValueError, match="closed file"):
        out.write(b"1,2\n" * (GZIP_BLOCK_BYTES // 4 * (GZIP_BLOCKS_AHEAD + 2)))
    with pytest.raises(ValueError, match="closed file"):
        out.close()
    assert out.closed


FORKED_WRITE = """
import multiprocessing, sys
from pathlib import Path
from pseo_das.schemas.distribution import GZIP_BLOCK_BYTES, open_output

def write(path):
    with open_output(Path(path)) as out:
        out.write(b"1,2\\n" * (GZIP_BLOCK_BYTES // 2))

if __name__ == "__main__":
    write(sys.argv[1] + "/parent.csv.gz")
    child = multiprocessing.get_context("fork").Process(target=write,
                                                        args=(sys.argv[1] + "/child.csv.gz",))
    child.start()
    child.join(60)
    if child.is_alive():
        child.kill()
        sys.exit("the forked process hung")
    sys.exit(child.exitcode)
"""


def test_a_forked_process_compresses_its_own_tables(tmp_path):
    """A process forked after its parent compressed a table has not its compressing thread:
    it makes its own (it hung before). In a process of its own: a test worker's threads
    would make the fork itself fragile."""
    script = tmp_path / "forked_write.py"
    script.write_text(FORKED_WRITE)
    done = subprocess.run([sys.executable, str(script), str(tmp_path)], capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert gzip.decompress((tmp_path / "child.csv.gz").read_bytes()) == \
        b"1,2\n" * (GZIP_BLOCK_BYTES // 2)
