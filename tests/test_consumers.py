"""A release read the ways the real PSEO files' consumers read them (issue 34): downloaded
gzipped over HTTP and gunzipped; loaded into a database with declared integer columns (as a
PostgreSQL loader does; SQLite here); read with pandas with and without dtype=str; sectors
and divisions added up; the site's folder structure and metadata files; the labelled
workbook. Uses the session's releases (conftest.releases), no release of its own."""
from __future__ import annotations

import csv
import functools
import gzip
import http.server
import io
import re
import sqlite3
import threading
import urllib.request
from contextlib import contextmanager
from pathlib import Path

import pandas as pd
import pytest

from conftest import csv_fields
from pseo_das.schemas.codes import STATE_POSTAL
from pseo_das.schemas.pseo_layout import Product, check_public_folder, layout

pytestmark = pytest.mark.slow  # reads the session's releases

STATES = ["co", "mi", "tx", "va", "wi"]      # the synthetic institutions' states
ORIGIN = ["inst_level", "institution", "degree_level", "cip_level", "cipcode", "grad_cohort"]
# lehd_csv_naming: [type]_[geohi].[ext]; the schema's Metadata section
NAMING = {"data": re.compile(r"pseo[ef]_(all|[a-z]{2})\.csv\.gz"),
          "institutions": re.compile(r"pseo_(all|[a-z]{2})_institutions\.csv"),
          "partners": re.compile(r"pseo_(all|[a-z]{2})_partners\.txt"),
          "version": re.compile(r"version_pseo\.txt")}
VERSION_LINE = re.compile(r"PSEO[EF] [A-Z]{2} [0-9]{2} [0-9]{4}-[0-9]{4} V4\.14\.0 [0-9]{4}Q[1-4] "
                          r"pseopu_[a-z]{2}_[0-9]{8}_[0-9]{4}")


@contextmanager
def served(folder: Path):
    """`folder` over HTTP on localhost, as the download site serves it (bytes as stored)."""
    handler = functools.partial(_QuietHandler, directory=str(folder))
    with http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler) as server:
        thread = threading.Thread(target=server.serve_forever, daemon=True)
        thread.start()
        try:
            yield f"http://127.0.0.1:{server.server_address[1]}"
        finally:
            server.shutdown()


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args) -> None:
        pass


@pytest.fixture(scope="module")
def public(releases) -> Path:
    root, _ = releases
    return root / "a" / "public"


def test_download_and_gunzip_as_the_pipelines_do(public, releases, tmp_path):
    """curl .../all/pseoe_all.csv.gz && gzip -d: the bytes served are a gzip file of the
    schema's CSV, with the rows the validator counts; the rerun's files are the same bytes."""
    root, _ = releases
    report = check_public_folder(public)
    with served(public) as site:
        for product in Product:
            name = f"{product.value}_all.csv.gz"
            body = urllib.request.urlopen(f"{site}/all/{name}").read()
            assert body == (public / "all" / name).read_bytes()
            assert body == (root / "a_again" / "public" / "all" / name).read_bytes()
            assert body[:2] == b"\x1f\x8b" and body[4:8] == b"\0\0\0\0"
            (tmp_path / name).write_bytes(body)
            text = gzip.decompress(body).decode("utf-8")
            header, *rows = text.splitlines()
            assert header.split(",") == list(layout(product).columns)
            assert len(rows) == report.rows[name]
            state = urllib.request.urlopen(f"{site}/co/{product.value}_co.csv.gz").read()
            assert gzip.decompress(state).decode().splitlines()[0] == header


def test_typed_loading_into_integer_columns(public):
    """A loader declares the schema's types (Char identifiers as TEXT, Numeric and every
    measure and flag as INTEGER) and copies the CSV in, empty as NULL: every value lands as
    an integer or NULL, no text in an integer column, codes keep their leading zeros.
    pseof is loaded from its smallest state's file: the same lines as pseof_all's
    (test_flows_files.test_state_copies_are_the_rows_of_their_state), on the session's data
    `wi`'s 387,871 of its 2,300,551 lines, with institution and state rows; pseoe_all whole."""
    smallest = min((public / st / f"pseof_{st}.csv.gz" for st in STATES),
                   key=lambda path: path.stat().st_size)
    for product, path in ((Product.PSEOE, public / "all" / "pseoe_all.csv.gz"),
                          (Product.PSEOF, smallest)):
        columns = layout(product).columns
        text_columns = {c for c in layout(product).identifiers} - {"agg_level_pseo",
                                                                   "grad_cohort_years"}
        types = {c: "TEXT" if c in text_columns else "INTEGER" for c in columns}
        db = sqlite3.connect(":memory:")
        db.execute(f"CREATE TABLE t ({', '.join(f'{c} {types[c]}' for c in columns)})")
        with gzip.open(path, "rt", newline="") as f:
            reader = csv.reader(f)
            assert next(reader) == list(columns)
            values = ", ".join(["NULLIF(?, '')"] * len(columns))    # empty as NULL
            db.executemany(f"INSERT INTO t VALUES ({values})", reader)
        stored = db.execute("SELECT " + ", ".join(f"group_concat(DISTINCT typeof({c}))"
                                                  for c in types) + " FROM t").fetchone()
        for (column, kind), kinds in zip(types.items(), stored):    # one pass over the rows
            found = set(kinds.split(","))
            assert found <= ({"text"} if kind == "TEXT" else {"integer", "null"}), (column, found)
        lengths = dict(db.execute("SELECT inst_level, min(length(institution)) FROM t "
                                  "GROUP BY inst_level"))
        assert lengths == {"I": 8, "S": 2}                       # 00134500, 08
        published = db.execute("SELECT count(*) FROM t WHERE status_y1_"
                               + ("earnings" if product is Product.PSEOE else "grads_emp")
                               + " = 1").fetchone()[0]
        assert published > 0


def test_pandas_with_and_without_dtype_str(public):
    """With dtype=str every code is text as written (OPEIDs keep their leading zeros, cipcode
    11.07 is not 11.07 the number). Without it pandas infers: the release's institutions are
    all digits, so `institution` comes out as integers with the zeros gone (the real files
    hold OPEIDs with letters, 0033290W, which is why pandas keeps them as text there: no
    quoting makes pandas' inference keep a digits-only column as text). Measures are numbers
    either way once converted; empty measures are NaN, never 0."""
    path = public / "all" / "pseoe_all.csv.gz"
    as_text = pd.read_csv(path, dtype=str, keep_default_na=False)
    institutions = as_text.loc[as_text["inst_level"] == "I", "institution"]
    assert institutions.str.fullmatch(r"[0-9]{8}").all() and institutions.str.startswith("0").all()
    assert set(as_text["cipcode"]) >= {"00"} and as_text["grad_cohort"].str.len().eq(4).all()
    inferred = pd.read_csv(path)
    assert pd.api.types.is_integer_dtype(inferred["institution"])
    assert (inferred["institution"].astype(str).str.len() < 8).any()  # leading zeros lost
    assert pd.api.types.is_float_dtype(inferred["y1_p50_earnings"])   # NaN where empty
    empty = as_text["y1_p50_earnings"] == ""
    assert inferred["y1_p50_earnings"][empty.to_numpy()].isna().all()
    assert (inferred["y1_p50_earnings"][~empty.to_numpy()]
            == as_text.loc[~empty, "y1_p50_earnings"].astype(int).to_numpy()).all()


def test_sectors_and_divisions_add_up_to_the_all_industries_row(public):
    """Where none of the cells is suppressed, the 20 sector rows (and the 9 division rows)
    of an origin add up to its national all-industries row, employed and employed in-state;
    non-employment is on the all-industries row only, so adding rows never counts it twice."""
    flows = csv_fields(public / "all" / "pseof_all.csv.gz").to_pandas()   # a third of pandas' CPU
    is_national = (flows["geo_level"] == "N") & (flows["ind_level"] == "A")
    national, detail = flows[is_national], flows[~is_national]
    assert (detail.filter(regex=r"^y\d+_grads_nme$") == "").all().all()
    assert (detail.filter(regex=r"^status_y\d+_grads_nme$") == "-1").all().all()
    compared = 0
    for k in (1, 5, 10):
        for measure in ("grads_emp", "grads_emp_instate"):
            value, flag = f"y{k}_{measure}", f"status_y{k}_{measure}"
            total = national[national[flag] == "1"].set_index(ORIGIN)[value].astype(int)
            for rows in (detail[(detail["geo_level"] == "N") & (detail["ind_level"] == "S")],
                         detail[(detail["geo_level"] == "D") & (detail["ind_level"] == "A")]):
                published = rows[flag] == "1"
                keys = [rows[column] for column in ORIGIN]
                complete = published.groupby(keys).all()
                sums = rows[value].where(published, "0").astype(int).groupby(keys).sum()
                both = total.index.intersection(complete[complete].index)
                assert len(both) > 0
                assert (sums.reindex(both) == total.reindex(both)).all(), (value, len(both))
                compared += len(both)
    assert compared > 10_000


def test_the_folder_structure_and_metadata_files_follow_the_naming_rules(public):
    """all/ and one folder per state (lehd_csv_naming: [GEOHI]/{files}), every file named as
    the schema names it; version lines in the compact notation, all/ holding every state's;
    partners files of three or more lines, the all/ file the states' in order."""
    assert sorted(p.name for p in public.iterdir() if p.is_dir()) == sorted(["all", "explorer"] + STATES)
    for folder in ["all"] + STATES:
        names = sorted(p.name for p in (public / folder).iterdir())
        kinds = {kind for name in names for kind, rule in NAMING.items() if rule.fullmatch(name)}
        data = [n for n in names if NAMING["data"].fullmatch(n)]
        assert {m.group(1) for n in names if (m := NAMING["data"].fullmatch(n))} == {folder}
        assert len(data) == 2 and kinds == set(NAMING), names
        partners = (public / folder / f"pseo_{folder}_partners.txt").read_text().splitlines()
        versions = (public / folder / "version_pseo.txt").read_text().splitlines()
        assert all(VERSION_LINE.fullmatch(line) for line in versions), versions
        if folder != "all":
            fips = {v.lower(): k for k, v in STATE_POSTAL.items()}[folder]
            assert partners[0].startswith(f"{fips} ") and len(partners) >= 3
            assert re.fullmatch(r"[0-9]{1,3}% of statewide graduates covered \([0-9]{4} "
                                r"estimate\)", partners[1]), partners[1]
            assert [v.split()[1] for v in versions] == [folder.upper()] * 2
    assert (public / "all" / "version_pseo.txt").read_text() == "".join(
        (public / st / "version_pseo.txt").read_text() for st in STATES)
    assert (public / "all" / "pseo_all_partners.txt").read_text() == "".join(
        (public / st / f"pseo_{st}_partners.txt").read_text() for st in STATES)
    institutions = pd.read_csv(public / "all" / "pseo_all_institutions.csv", dtype=str)
    assert len(institutions) == sum(len(pd.read_csv(public / st / f"pseo_{st}_institutions.csv"))
                                    for st in STATES)


def test_the_labelled_workbook_as_excel_users_read_it(public):
    """all/pseoe_all.xlsx: pseoe_all's rows and values, a label after each code column."""
    openpyxl = pytest.importorskip("openpyxl")
    book = openpyxl.load_workbook(public / "all" / "pseoe_all.xlsx", read_only=True)
    assert book.sheetnames == ["pseoe_all", "variables"]
    workbook = (public / "all" / "pseoe_all.xlsx").read_bytes()
    # pandas' calamine engine reads the whole sheet (1.2 CPU s; openpyxl, pandas' default,
    # 8.8); openpyxl reads its first rows to the same frame
    sheet = pd.read_excel(io.BytesIO(workbook), sheet_name="pseoe_all", dtype=str,
                          keep_default_na=False, engine="calamine")
    pd.testing.assert_frame_equal(
        pd.read_excel(io.BytesIO(workbook), sheet_name="pseoe_all", dtype=str,
                      keep_default_na=False, engine="openpyxl", nrows=500), sheet.head(500))
    published = pd.read_csv(public / "all" / "pseoe_all.csv.gz", dtype=str, keep_default_na=False)
    assert list(sheet.drop(columns=[c for c in sheet if c.endswith("_label")]).columns) == \
        list(published.columns)
    assert len(sheet) == len(published)
    pd.testing.assert_frame_equal(sheet[published.columns], published)
    state_rows = sheet[sheet["inst_level"] == "S"]
    assert (state_rows["institution_label"] == "Institutions in " + state_rows["institution"].map(
        {"08": "Colorado", "26": "Michigan", "48": "Texas", "51": "Virginia", "55": "Wisconsin"})
    ).all()
    assert (sheet["inst_level_label"] != "").all() and (sheet["cipcode_label"] != "").all()
