"""The layout validator of the official PSEO public-use files (LEHD Public Use Schema V4.14):
a small valid folder passes; each corruption fails with a problem naming the file and column,
the same problems from the files (`pseo-das validate-layout`) and from their tables checked
as a release writes them (`in_stream`, TableCheck)."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

from pseo_das.schemas.distribution import table_path
from pseo_das.schemas.pseo_layout import (LayoutInputMissing, LayoutProblem, LayoutReport,
                                          Product, TableCheck, aggregation_levels,
                                          check_public_folder, code_lists, expected_columns,
                                          layout, layout_report)

IDENTIFIERS = ["agg_level_pseo", "inst_level", "institution", "degree_level", "cip_level",
               "cipcode", "grad_cohort", "grad_cohort_years", "geo_level", "geography",
               "ind_level", "industry"]
PSEOE, PSEOF = "pseoe_all.csv", "pseof_all.csv"

# Real codes of the label files, per level of each identifier.
INSTITUTIONS = {"I": ["00123400", "00987600"], "S": ["08", "26"]}   # OPEIDs; CO, MI
CIPCODES = {"A": ["00"], "2": ["11", "52"], "4": ["11.07", "52.02"]}
GEOGRAPHIES = {"N": ["00"], "D": ["8", "5"]}                        # Mountain, South Atlantic
INDUSTRIES = {"A": ["00"], "S": ["31-33", "54"]}
DEGREES = {"05": "3", "07": "5"}                                    # bachelor's, master's
COHORTS = {"0": ["0000"], "1": ["2016", "2019"]}


def _pick(codes: list[str], i: int) -> str:
    return codes[i % len(codes)]


def _cells(level: pd.Series):
    """Identifier tuples of one aggregation level: two of each varying code, every
    degree level of DEGREES (so master's at 4-digit CIP, the restricted cells, are there)."""
    for k, (degree, years) in enumerate(DEGREES.items()):
        for j in range(2):
            pick = (j + k) % 2
            yield {"agg_level_pseo": level["agg_level_pseo"],
                   "inst_level": level["inst_level"],
                   "institution": INSTITUTIONS[level["inst_level"]][j],
                   "degree_level": degree, "cip_level": level["cip_level"],
                   "cipcode": _pick(CIPCODES[level["cip_level"]], pick),
                   "grad_cohort": _pick(COHORTS[level["by_grad_cohort"]], pick),
                   "grad_cohort_years": years,
                   "geo_level": level["geo_level"],
                   "geography": _pick(GEOGRAPHIES[level["geo_level"]], pick),
                   "ind_level": level["ind_level"],
                   "industry": _pick(INDUSTRIES[level["ind_level"]], j)}


def _measures(product: Product, row: dict, n: int) -> dict:
    """Values and flags of one row: published, suppressed (5) and not available (-1)
    by turns; the restricted cells (07 / 17 at 4-digit CIP, earnings) all suppressed."""
    out = {}
    lay = layout(product)
    restricted = (product is Product.PSEOE and row["cip_level"] == "4"
                  and row["degree_level"] in ("07", "17"))
    detail = product is Product.PSEOF and (row["geo_level"], row["ind_level"]) != ("N", "A")
    for flag in lay.status_flags:
        ipeds = flag.endswith("_ipeds_count")
        if detail and flag.endswith("_grads_nme"):
            out[flag] = "-1"          # the origin's non-employment: national total row only
        elif restricted:
            out[flag] = "3" if ipeds else "5"
        elif ipeds:
            out[flag] = ["1", "2", "3", "4"][(n + len(out)) % 4]
        else:
            out[flag] = ["1", "1", "5", "-1"][(n + len(out)) % 4]
    for i, indicator in enumerate(lay.indicators):
        flag = out[indicator.status_flag]
        published = flag in ("1", "2", "4") if indicator.ipeds else flag == "1"
        value = (30_000 + 1_000 * (n % 7) + 10_000 * (i % 3) if indicator.units == "Dollars"
                 else n % 50 + i)           # a count of 0 is fine
        out[indicator.name] = str(value) if published else ""
    return out


def write_valid_folder(folder: Path) -> Path:
    """pseoe_all.csv and pseof_all.csv: rows for every aggregation level of each product,
    consistent identifiers, real codes, published, suppressed and unavailable values."""
    folder.mkdir(parents=True, exist_ok=True)
    for product in Product:
        rows = []
        for _, level in layout(product).levels.iterrows():
            for cell in _cells(level):
                rows.append(cell | _measures(product, cell, len(rows)))
        frame = pd.DataFrame(rows, columns=list(expected_columns(product)))
        frame.to_csv(folder / product.file_name, index=False)
    return folder


@pytest.fixture
def valid(tmp_path) -> Path:
    return write_valid_folder(tmp_path / "public")


def _read(folder: Path, name: str) -> pd.DataFrame:
    return pd.read_csv(folder / name, dtype=str, keep_default_na=False)


def _write(frame: pd.DataFrame, folder: Path, name: str) -> None:
    frame.to_csv(folder / name, index=False)


STREAM_BLOCK_ROWS = 50       # the valid files' tables are fed in blocks of this many rows


def in_stream(folder: Path) -> LayoutReport:
    """The folder's official files read as text tables and checked as a release checks the
    tables it writes: fed to TableCheck block by block."""
    checks = []
    for product in Product:
        path = table_path(folder, product.file_name)
        table = pa.Table.from_pandas(pd.read_csv(path, dtype=str, keep_default_na=False),
                                     preserve_index=False)
        check = TableCheck(path.name, product, table.column_names)
        for start in range(0, table.num_rows, STREAM_BLOCK_ROWS):
            check.add(table.slice(start, STREAM_BLOCK_ROWS))
        checks.append(check)
    return layout_report(folder, checks)


def _only(folder: Path, file: str, column: str, words: str) -> LayoutProblem:
    """The problems of the folder: at least one, all in `file`; returns the one that names
    `column` and whose rule says `words`. The tables checked in-stream give the same
    problems (but for a ragged row: a table has none)."""
    report = check_public_folder(folder)
    if not any(p.columns == ("*",) for p in report.problems):
        assert list(map(str, in_stream(folder).problems)) == list(map(str, report.problems))
    assert not report.ok
    assert {p.file for p in report.problems} == {file}, report.problems
    found = [p for p in report.problems if column in p.columns and words in p.rule]
    assert found, "\n".join(map(str, report.problems))
    return found[0]


# --- the expected layout ---------------------------------------------------------------------

def test_columns_come_from_the_schema_files():
    pseoe, pseof = expected_columns("pseoe"), expected_columns("pseof")
    assert (len(pseoe), len(pseof)) == (36, 30)
    assert list(pseoe[:12]) == IDENTIFIERS and list(pseof[:12]) == IDENTIFIERS
    assert pseoe[12:16] == ("y1_p25_earnings", "y1_p50_earnings", "y1_p75_earnings",
                            "y1_grads_earn")
    # flags after the indicators, in order of first appearance (the percentiles share one)
    assert pseoe[27:] == ("status_y1_earnings", "status_y1_grads_earn", "status_y5_earnings",
                          "status_y5_grads_earn", "status_y10_earnings",
                          "status_y10_grads_earn", "status_y1_ipeds_count",
                          "status_y5_ipeds_count", "status_y10_ipeds_count")
    assert pseof[12:15] == ("y1_grads_emp", "y1_grads_emp_instate", "y5_grads_emp")
    assert pseof[21:] == tuple("status_" + c for c in pseof[12:21])


def test_aggregation_levels_and_code_lists():
    pseoe, pseof = aggregation_levels("pseoe"), aggregation_levels("pseof")
    assert pseoe == ("26", "28", "30", "32", "34", "36", "38", "40", "42", "44", "46", "48")
    assert len(pseof) == 32 and "30" not in pseof and {"74", "122", "192"} - set(pseof) == {"192"}
    codes = code_lists()
    assert codes.divisions == frozenset("123456789")
    assert "31-33" in codes.sectors and "00" not in codes.sectors
    assert len(codes.institution_states) == 51 and "72" not in codes.institution_states
    assert "11.07" in codes.cipcodes["4"] and "51.25" not in codes.cipcodes["4"]
    assert codes.status_flags == frozenset({"-1", "1", "5"})
    assert codes.ipeds_flags == frozenset({"1", "2", "3", "4"})


# --- the valid folder ------------------------------------------------------------------------

def test_the_valid_folder_passes(valid):
    report = check_public_folder(valid)
    assert report.problems == []
    assert in_stream(valid) == report
    assert report.rows == {PSEOE: 12 * 4, PSEOF: 32 * 4}
    pseoe = _read(valid, PSEOE)
    restricted = (pseoe["cip_level"] == "4") & (pseoe["degree_level"] == "07")
    assert restricted.sum() == 4 * 2            # four 4-digit CIP levels, two master's cells
    assert (pseoe.loc[restricted, "status_y1_earnings"] == "5").all()
    assert (pseoe.loc[restricted, "y1_p50_earnings"] == "").all()
    unrestricted = ~restricted
    for flag in ("status_y1_earnings", "status_y5_grads_earn"):  # every kind of flag is there
        assert set(pseoe.loc[unrestricted, flag]) == {"1", "5", "-1"}
    assert set(pseoe["status_y1_ipeds_count"]) == {"1", "2", "3", "4"}


# --- header ----------------------------------------------------------------------------------

def test_a_missing_column(valid):
    _write(_read(valid, PSEOE).drop(columns="y5_grads_earn"), valid, PSEOE)
    problem = _only(valid, PSEOE, "y5_grads_earn", "missing")
    assert problem.rows == 0


def test_two_swapped_columns(valid):
    frame = _read(valid, PSEOF)
    columns = list(frame.columns)
    i, j = columns.index("institution"), columns.index("degree_level")
    columns[i], columns[j] = columns[j], columns[i]
    _write(frame[columns], valid, PSEOF)
    problem = _only(valid, PSEOF, "institution", "order")
    assert set(problem.columns) == {"institution", "degree_level"}


def test_a_ragged_row(valid):
    with open(valid / PSEOF, "a") as handle:
        handle.write("26,S,08\n")
    problem = _only(valid, PSEOF, "*", "fields")
    assert problem.rows == 1 and problem.examples == ((32 * 4, "3 fields"),)


# --- identifiers -----------------------------------------------------------------------------

def _corrupt(folder: Path, name: str, where, column: str, value: str) -> list[int]:
    frame = _read(folder, name)
    rows = frame.index[where(frame)][:3]
    assert len(rows) > 0
    frame.loc[rows, column] = value
    _write(frame, folder, name)
    return list(rows)


@pytest.mark.parametrize("code", ["01", "Z"])   # a state's FIPS width; Z is Unclassified
def test_a_division_coded_01(valid, code):
    rows = _corrupt(valid, PSEOF, lambda f: f["geo_level"] == "D", "geography", code)
    problem = _only(valid, PSEOF, "geography", "division")
    assert problem.rows == 3
    assert [row for row, _ in problem.examples] == rows
    assert f"geography={code!r}" in problem.examples[0][1]


def test_an_inst_level_n_row(valid):
    _corrupt(valid, PSEOE, lambda f: f["inst_level"] == "S", "inst_level", "N")
    problem = _only(valid, PSEOE, "inst_level", "agg_level_pseo")
    assert "inst_level='N'" in problem.examples[0][1]


def test_a_four_digit_cipcode_without_its_dot(valid):
    _corrupt(valid, PSEOE, lambda f: f["cipcode"] == "11.07", "cipcode", "1107")
    problem = _only(valid, PSEOE, "cipcode", "CIP-2020")
    assert "cipcode='1107'" in problem.examples[0][1]


def test_a_cip_2010_only_code(valid):
    _corrupt(valid, PSEOE, lambda f: (f["cip_level"] == "4") & (f["degree_level"] == "05"),
             "cipcode", "51.25")
    problem = _only(valid, PSEOE, "cipcode", "CIP-2020")
    assert problem.rows == 3 and "51.25" in str(problem)


def test_a_state_institution_coded_as_in_the_old_files(valid):
    _corrupt(valid, PSEOE, lambda f: f["inst_level"] == "S", "institution", "00000008")
    _only(valid, PSEOE, "institution", "state FIPS")


def test_grad_cohort_and_cohort_years(valid):
    _corrupt(valid, PSEOE, lambda f: f["agg_level_pseo"] == "26", "grad_cohort", "2016")
    _corrupt(valid, PSEOF, lambda f: f["degree_level"] == "05", "grad_cohort_years", "5")
    report = check_public_folder(valid)
    assert {(p.file, p.columns[0]) for p in report.problems} == {
        (PSEOE, "grad_cohort"), (PSEOF, "grad_cohort_years")}


def test_a_duplicated_cell(valid):
    frame = _read(valid, PSEOF)
    _write(pd.concat([frame, frame.iloc[[5]]], ignore_index=True), valid, PSEOF)
    problem = _only(valid, PSEOF, "agg_level_pseo", "unique")
    assert problem.examples[0][0] == len(frame)


# --- aggregation levels ----------------------------------------------------------------------

def test_an_aggregation_level_missing(valid):
    frame = _read(valid, PSEOF)
    _write(frame[frame["agg_level_pseo"] != "40"], valid, PSEOF)
    problem = _only(valid, PSEOF, "agg_level_pseo", "absent: 40")
    assert problem.rows == 0


def test_a_level_flagged_0_for_the_product(valid):
    frame = _read(valid, PSEOF)
    row = frame[frame["agg_level_pseo"] == "28"].iloc[[0]].copy()   # CIP 2-digit x state
    row[["agg_level_pseo", "cip_level", "cipcode"]] = ["30", "4", "11.07"]
    _write(pd.concat([frame, row], ignore_index=True), valid, PSEOF)
    problem = _only(valid, PSEOF, "agg_level_pseo", "flagged 0")
    assert problem.rows == 1 and problem.examples == ((len(frame), "agg_level_pseo='30'"),)


# --- flags and measures ----------------------------------------------------------------------

def test_a_published_four_digit_value_for_masters(valid):
    frame = _read(valid, PSEOE)
    at = frame.index[(frame["cip_level"] == "4") & (frame["degree_level"] == "07")][0]
    frame.loc[at, ["y5_p50_earnings", "y5_p25_earnings", "y5_p75_earnings"]] = "52000"
    frame.loc[at, "status_y5_earnings"] = "1"
    _write(frame, valid, PSEOE)
    value = _only(valid, PSEOE, "y5_p50_earnings", "Restricted 4-Digit CIP")
    flag = _only(valid, PSEOE, "status_y5_earnings", "Restricted 4-Digit CIP")
    assert value.examples[0][0] == flag.examples[0][0] == at


def test_a_status_flag_2(valid):
    rows = _corrupt(valid, PSEOF, lambda f: f["status_y5_grads_nme"] == "5",
                    "status_y5_grads_nme", "2")
    problem = _only(valid, PSEOF, "status_y5_grads_nme", "-1, 1, 5")
    assert problem.examples[0] == (rows[0], "status_y5_grads_nme='2'")


def test_nme_repeated_on_sector_and_division_rows_fails(valid):
    """The origin's non-employment (y*_grads_nme) is published on the all-industries
    national row only: a file that repeats it on a sector or division row (value or flag)
    fails, naming the rows."""
    frame = _read(valid, PSEOF)
    national = (frame["geo_level"] == "N") & (frame["ind_level"] == "A")
    assert (frame.loc[~national, "y1_grads_nme"] == "").all()
    assert (frame.loc[~national, "status_y1_grads_nme"] == "-1").all()
    sector = frame.index[(frame["geo_level"] == "N") & (frame["ind_level"] == "S")][0]
    division = frame.index[frame["geo_level"] == "D"][0]
    frame.loc[sector, ["y1_grads_nme", "status_y1_grads_nme"]] = ["12", "1"]
    frame.loc[division, "status_y5_grads_nme"] = "5"
    _write(frame, valid, PSEOF)
    one = _only(valid, PSEOF, "y1_grads_nme", "measure of the origin")
    assert one.rows == 1 and one.examples[0][0] == sector
    five = _only(valid, PSEOF, "y5_grads_nme", "measure of the origin")
    assert five.rows == 1 and five.examples[0][0] == division


def test_an_ipeds_flag_outside_its_list(valid):
    _corrupt(valid, PSEOE, lambda f: f["status_y1_ipeds_count"] == "2",
             "status_y1_ipeds_count", "5")
    _only(valid, PSEOE, "status_y1_ipeds_count", "label_flags_ipeds_count")


@pytest.mark.parametrize("flag, value, words", [
    ("5", "17", "withholds"),      # a suppressed value that is published
    ("1", "", "publishes"),        # an OK flag without its value
])
def test_a_value_must_follow_its_flag(valid, flag, value, words):
    frame = _read(valid, PSEOF)
    at = frame.index[frame["status_y10_grads_emp"] != flag][0]
    frame.loc[at, ["status_y10_grads_emp", "y10_grads_emp"]] = [flag, value]
    _write(frame, valid, PSEOF)
    problem = _only(valid, PSEOF, "y10_grads_emp", words)
    assert problem.rows == 1 and problem.examples[0][0] == at


@pytest.mark.parametrize("column, value", [("y1_grads_earn", "-3"), ("y1_grads_earn", "12.0"),
                                           ("y1_p50_earnings", "41000.5"),
                                           ("y1_p50_earnings", "041000")])
def test_measures_are_integers_and_counts_not_negative(valid, column, value):
    _corrupt(valid, PSEOE, lambda f: f[column] != "", column, value)
    _only(valid, PSEOE, column, "integer")


# --- the folder and the command ------------------------------------------------------------

def test_the_files_gzipped_in_the_all_folder_are_read_as_published(valid, tmp_path):
    """A release's public folder as distributed (all/pseoe_all.csv.gz, ...) is checked as
    the plain files are: the same rows, the same problems, named by the published files."""
    import gzip
    public = tmp_path / "release" / "public"
    (public / "all").mkdir(parents=True)
    for name in (PSEOE, PSEOF):
        (public / "all" / f"{name}.gz").write_bytes(gzip.compress((valid / name).read_bytes()))
    report = check_public_folder(public)
    assert report.ok and report.rows == {f"{PSEOE}.gz": 12 * 4, f"{PSEOF}.gz": 32 * 4}
    _corrupt(valid, PSEOF, lambda f: f["geo_level"] == "D", "geography", "01")
    (public / "all" / f"{PSEOF}.gz").write_bytes(gzip.compress((valid / PSEOF).read_bytes()))
    assert {p.file for p in check_public_folder(public).problems} == {f"{PSEOF}.gz"}
    (public / "all" / f"{PSEOE}.gz").write_bytes(b"not gzip")
    assert any("not a UTF-8 CSV" in p.rule for p in check_public_folder(public).problems)


def test_a_missing_file_or_folder_is_refused(tmp_path, valid):
    with pytest.raises(LayoutInputMissing, match="no such folder"):
        check_public_folder(tmp_path / "nowhere")
    (valid / PSEOF).unlink()
    with pytest.raises(LayoutInputMissing, match=PSEOF):
        check_public_folder(valid)


def _cli(*args: str) -> int:
    from pseo_das.cli import main
    with pytest.raises(SystemExit) as stop:
        main(["validate-layout", *args])
    return stop.value.code


def test_the_command(valid, tmp_path, capsys):
    assert _cli(str(valid)) == 0
    out = capsys.readouterr().out
    assert "layout valid: pseoe_all.csv 48 rows, pseof_all.csv 128 rows" in out

    _corrupt(valid, PSEOF, lambda f: f["geo_level"] == "D", "geography", "01")
    assert _cli(str(valid)) == 1
    out = capsys.readouterr().out
    assert "pseof_all.csv: geography:" in out and "geography='01'" in out
    assert "layout valid" not in out

    assert _cli(str(tmp_path / "nowhere")) == 2
    captured = capsys.readouterr()
    assert "no such folder" in captured.err and "Traceback" not in captured.err


@pytest.mark.parametrize("column, value", [
    ("institution", "\u0660\u0660\u0661\u0662\u0663\u0664\u0660\u0660"),   # Arabic-Indic digits
    ("institution", "\uff10\uff10\uff11\uff12\uff13\uff14\uff10\uff10"),   # full-width digits
    ("institution", "00123400 "), ("y1_grads_earn", "\uff11\uff12"), ("grad_cohort", "\u0662\u0660\u0661\u0666")])
def test_codes_and_values_are_ascii_digits_through_the_command(valid, capsys, column, value):
    """A code or value in other Unicode digits, or with a space, fails validate-layout
    (issue 31: the official files published an OPEID in Arabic-Indic digits)."""
    _corrupt(valid, PSEOE, lambda f: (f["inst_level"] == "I") & (f[column] != ""), column,
             value)
    assert _cli(str(valid)) == 1
    out = capsys.readouterr().out
    assert f"pseoe_all.csv: {column}" in out and f"{column}={value!r}" in out, out


def test_every_level_of_both_products_is_in_the_valid_folder(valid):
    for product, name in [(Product.PSEOE, PSEOE), (Product.PSEOF, PSEOF)]:
        frame = _read(valid, name)
        assert tuple(frame.columns) == expected_columns(product)
        assert set(frame["agg_level_pseo"]) == set(aggregation_levels(product))


# --- read in blocks ----------------------------------------------------------------------

def test_the_check_in_small_blocks_finds_what_the_whole_file_check_finds(valid, monkeypatch):
    """A file is checked one block of rows at a time (bounded memory): with blocks of 1 KB,
    a repeated cell whose rows are blocks apart, a corrupted row in a later block (named by
    its row in the file) and a level absent from every block are all found, exactly as
    with the whole file in one block."""
    from pseo_das.schemas import pseo_layout
    frame = _read(valid, PSEOF)
    frame = frame[frame["agg_level_pseo"] != "40"].reset_index(drop=True)
    last = len(frame) - 1
    frame.loc[last, "geography"] = "01"
    _write(pd.concat([frame, frame.iloc[[2]]], ignore_index=True), valid, PSEOF)
    assert (valid / PSEOF).stat().st_size > 8 * 1024
    whole = check_public_folder(valid).problems
    monkeypatch.setattr(pseo_layout, "BATCH_BYTES", 1024)
    monkeypatch.setattr(pseo_layout, "CHECK_ROWS", 1)
    blocks = check_public_folder(valid).problems
    assert sorted(map(str, blocks)) == sorted(map(str, whole))
    found = {p.rule.split(" (")[0].split(";")[0]: p for p in blocks}
    assert found["one row per cell"].examples[0][0] == len(frame)
    assert any("absent: 40" in p.rule for p in blocks)
    division = [p for p in blocks if "geography" in p.columns and "division" in p.rule]
    assert division and division[0].examples[0][0] == last


def _repeated(blocks, parts=8, read=3):
    from pseo_das.schemas.cell_keys import CellKeys
    with CellKeys(parts) as keys:
        for first, second in blocks:
            keys.add(first, second)
        return keys.repeated_rows(read).tolist()


def test_repeated_rows_are_the_rows_an_earlier_row_has_the_keys_of():
    """The repeat search (the first hashes sorted part by part, then both hashes on the
    candidates, read back a few rows at a time) against the definition, on small random
    keys with many ties in either hash, in every part of the first hash's range, added
    whole and in blocks of consecutive rows."""
    rng = np.random.default_rng(1)
    spread = np.arange(8, dtype=np.uint64) << np.uint64(61)   # one value in each part
    for _ in range(300):
        n = int(rng.integers(1, 40))
        first = spread[rng.integers(0, 8, n)] + rng.integers(0, 3, n).astype(np.uint64)
        second = rng.integers(0, 3, n).astype(np.uint32)
        expected = [r for r in range(n) if any(first[e] == first[r] and second[e] == second[r]
                                               for e in range(r))]
        cuts = np.sort(rng.integers(0, n + 1, int(rng.integers(0, 4))))
        assert _repeated([(first, second)], read=1 << 20) == expected
        assert _repeated(zip(np.split(first, cuts), np.split(second, cuts)),
                         read=int(rng.integers(1, 8))) == expected
    distinct = np.arange(10, dtype=np.uint64)
    assert _repeated([(distinct[:2], np.zeros(2, np.uint32)),
                      (distinct[2:], np.zeros(8, np.uint32))]) == []


def test_tied_values_are_those_found_more_than_once_in_any_part():
    """`CellKeys.tied` (the first hashes kept and sorted in parts by their top bits)
    against np.unique's counts, on values across the whole uint64 range and crowded in
    one part."""
    from pseo_das.schemas.cell_keys import CellKeys
    rng = np.random.default_rng(2)
    for parts in (2, 8, 16):
        for _ in range(50):
            pool = rng.integers(0, 2 ** 64 - 1, 30, dtype=np.uint64, endpoint=True)
            if rng.random() < 0.3:
                pool >>= np.uint64(8)                       # all in the first part
            values = pool[rng.integers(0, len(pool), int(rng.integers(0, 60)))]
            unique, counts = np.unique(values, return_counts=True)
            with CellKeys(parts) as keys:
                for block in np.split(values, np.sort(rng.integers(0, len(values) + 1, 3))):
                    keys.add(block, np.zeros(len(block), np.uint32))
                assert keys.tied().tolist() == unique[counts > 1].tolist()
