"""The release explorer (tasks/publication/explorer*.py, reports/explorer/): its data files
hold the public files' values (status flags as words), the folder is self-contained, the
command refuses what it cannot do. Fast tests on a tiny release folder made here; the
system tests read the session's releases (conftest.py). The browser tests are in
tests/test_explorer_browser.py."""
from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from conftest import public_table
from pseo_das.schemas.pseo_layout import Product, layout
from pseo_das.tasks.publication.explorer import (EXPLORER, ExplorerError, explore,
                                                 page_files, write_release_explorers)
from pseo_das.tasks.publication.explorer_board import accuracy_rows, board_data
from pseo_das.tasks.publication.explorer_data import (EARNINGS_FIELDS, SUPPRESSED,
                                                      ExplorerInputError, explorer_data)

SECTORS = ["11", "23", "62"]
DIVISIONS = [str(d) for d in range(1, 10)]
BINS = [(10000, 20000), (20000, 40000), (40000, 614597)]
STATE, INSTITUTION = "08", "00134500"


def _identifiers(inst_level: str, institution: str, cip: str, **more) -> dict:
    return {"agg_level_pseo": "38", "inst_level": inst_level, "institution": institution,
            "degree_level": "05", "cip_level": "A" if cip == "00" else str(len(cip.replace(".", ""))),
            "cipcode": cip, "grad_cohort": "0000", "grad_cohort_years": "3", "geo_level": "N",
            "geography": "00", "ind_level": "A", "industry": "00"} | more


def _pseoe_row(inst_level: str, institution: str, cip: str, base: int, flags: tuple) -> dict:
    row = _identifiers(inst_level, institution, cip)
    for n, k in enumerate((1, 5, 10)):
        published = flags[n] == "1"
        for p, f in ((25, 0.7), (50, 1.0), (75, 1.4)):
            row[f"y{k}_p{p}_earnings"] = str(int(base * f) + k) if published else ""
        row[f"y{k}_grads_earn"] = str(40 + k) if published else ""
        row[f"status_y{k}_earnings"] = row[f"status_y{k}_grads_earn"] = flags[n]
        row[f"y{k}_ipeds_count"] = str(50 + k)
        row[f"status_y{k}_ipeds_count"] = "1"
    return row


def _write_gz(frame: pd.DataFrame, path: Path, columns) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    frame[list(columns)].to_csv(path, index=False, compression="gzip")


def tiny_release(root: Path) -> Path:
    """A release folder as a release writes it, for one state and one institution: pseoe
    (a published, a suppressed and a not-yet-observable year), pseoh, pseof (a suppressed
    division), the metadata files, the notes and the internal files the board reads."""
    public, internal = root / "public", root / "internal"
    pseoe = pd.DataFrame([_pseoe_row("S", STATE, "00", 50000, ("1", "1", "-1")),
                          _pseoe_row("I", INSTITUTION, "00", 40000, ("1", "5", "-1")),
                          _pseoe_row("I", INSTITUTION, "11", 60000, ("5", "1", "-1"))])
    _write_gz(pseoe, public / "all" / "pseoe_all.csv.gz", layout(Product.PSEOE).columns)
    histograms = []
    for _, row in pseoe.iterrows():
        for k in (1, 5):
            for b, (lower, upper) in enumerate(BINS, start=1):
                histograms.append({c: row[c] for c in layout(Product.PSEOE).identifiers}
                                  | {"years_after": k, "bin": b, "bin_lower": lower,
                                     "bin_upper": upper, "noisy_count": b * k - 2})
    _write_gz(pd.DataFrame(histograms), public / "all" / "pseoh_all.csv.gz",
              list(histograms[0]))
    flows = []
    for unit, level in ((STATE, "S"), (INSTITUTION, "I")):
        for geo_level, geography in [("N", "00")] + [("D", d) for d in DIVISIONS]:
            for industry in ["00"] + SECTORS:
                row = _identifiers(level, unit, "00", geo_level=geo_level, geography=geography,
                                   ind_level="A" if industry == "00" else "S", industry=industry)
                suppressed = geography == "5"
                national_total = (geo_level, industry) == ("N", "00")
                value = {"00": 30, "11": 5, "23": 10, "62": 15}[industry] if geo_level == "N" \
                    else (0 if geography != "8" else {"00": 28, "11": 5, "23": 10, "62": 13}[industry])
                for k in (1, 5, 10):
                    for measure in ("grads_emp", "grads_emp_instate"):
                        row[f"y{k}_{measure}"] = "" if suppressed else str(value)
                        row[f"status_y{k}_{measure}"] = "5" if suppressed else "1"
                    row[f"y{k}_grads_nme"] = "7" if national_total else ""
                    row[f"status_y{k}_grads_nme"] = "1" if national_total else "-1"
                flows.append(row)
    _write_gz(pd.DataFrame(flows), public / "all" / "pseof_all.csv.gz", layout(Product.PSEOF).columns)
    (public / "all" / "pseo_all_institutions.csv").write_text(
        f"institution,label,institution_state,statefips\n{INSTITUTION},Adams State University,CO,{STATE}\n")
    (public / "all" / "version_pseo.txt").write_text("PSEOE CO 08 2001-2019 V4.14.0 2026Q4 x\n")
    (public / "release_notes.md").write_text("# PSEO release 2026Q4-tiny: release notes\n"
                                             "in **2016 dollars** (technical appendix A.2) ... "
                                             "are in **2023 dollars**\n")
    internal.mkdir(parents=True)
    (internal / "drb_report.md").write_text(DRB_TABLE)
    (internal / "ledger.csv").write_text(
        "tabulation_id,product,epsilon\nearnings.I.cip4.y1,earnings histograms,1\n"
        "flows.I.cip2.y1,employment flows,6/5\ncip-recast.x,earnings histograms,0\n")
    (internal / "lifetime_budget.csv").write_text(
        f"institution,degree_level,grad_cohort,before,this_release,after\n{INSTITUTION},05,2016,0,5/2,5/2\n")
    (internal / "release_summary.json").write_text(json.dumps(
        {"new_epsilon": "7.5", "lifetime_epsilon_cap": "30", "max_lifetime_epsilon": "5/2"}))
    return root


DRB_TABLE = """## Expected accuracy of the published percentiles

| cell size | percentile | cells | mean relative accuracy | median relative accuracy | mean absolute error ($) |
|---|---|---|---|---|---|
| 30-49 | 50 | 1,473 | 0.895 | 0.932 | 6,241 |
| 300 and over | 50 | 82 | 0.990 | 0.992 | 536 |
| 30 and over | 50 | 1,555 | 0.923 | 0.955 | 4,597 |

## The frame and IPEDS
"""


@pytest.fixture
def release(tmp_path) -> Path:
    return tiny_release(tmp_path / "release")


def field(values: list, name: str):
    return values[1 + EARNINGS_FIELDS.index(name)]


def test_unit_files_hold_the_public_values_and_flags_as_words(release):
    data = explorer_data(release / "public")
    assert data.facts["units"] == [INSTITUTION, STATE] and data.facts["bins"] == [list(b) for b in BINS]
    assert data.facts["dollars"] == {"published": "2023", "bins": "2016"}
    assert data.facts["release"] == "2026Q4-tiny"
    assert data.facts["labels"]["cip"]["11"].startswith("Computer and Information Sciences")
    cell = data.units[INSTITUTION]["earnings"]["05|00|0000"]
    assert cell[0] == 3 and field(cell, "y1_p50_earnings") == 40001
    assert field(cell, "y5_p50_earnings") == SUPPRESSED and field(cell, "y5_grads_earn") == SUPPRESSED
    assert field(cell, "y10_p50_earnings") is None                    # not available
    assert cell[-3:] == ["1", "1", "1"] and cell[-6:-3] == [51, 55, 60]  # IPEDS counts, flags
    assert data.units[INSTITUTION]["histograms"]["05|11|0000|5"] == [3, 8, 13]
    flows = data.units[INSTITUTION]["flows"]["05|00|0000"]["y5"]
    assert flows["emp"][:4] == [30, 5, 10, 15]                        # nation: all, sectors
    assert flows["emp"][4:] == [0, 0, 0, 0, SUPPRESSED, 0, 0, 28, 0]  # divisions
    assert flows["nme"] == 7 and flows["instate"] == [30, 5, 10, 15]
    destinations = data.facts["flow_destinations"]
    pairs = dict(zip(flows["sectors"][::2], flows["sectors"][1::2]))
    assert {tuple(destinations[i]): v for i, v in pairs.items()} == \
        {("D", "5", s): SUPPRESSED for s in SECTORS} | {("D", "8", "11"): 5, ("D", "8", "23"): 10,
                                                         ("D", "8", "62"): 13}


def test_accuracy_rows_read_the_drb_table():
    rows = accuracy_rows(DRB_TABLE)
    assert [r["size"] for r in rows] == ["30-49", "300 and over", "30 and over"]
    assert rows[0] == {"size": "30-49", "percentile": 50, "cells": 1473, "mean_accuracy": 0.895,
                       "median_accuracy": 0.932, "mean_abs_error": 6241, "all_sizes": False}
    assert [r["all_sizes"] for r in rows] == [False, False, True]
    assert accuracy_rows("# a report without the table\n") == []


def test_board_data_sums_epsilon_exactly_and_maps_suppression(release):
    data = explorer_data(release / "public")
    board = board_data(release / "internal",
                       {u: v["earnings"] for u, v in data.units.items()})
    assert board["epsilon"] == [{"product": "earnings histograms", "epsilon": "1", "value": 1.0},
                                {"product": "employment flows", "epsilon": "6/5", "value": 1.2}]
    assert board["lifetime"] == {INSTITUTION: [["05", "2016", "0", "5/2", "5/2"]]}
    assert board["suppression"][INSTITUTION] == {"05": [2, 2]}   # medians: 2 suppressed, 2 published
    assert board["lifetime_cap"] == "30"


LOCAL_REFERENCE = re.compile(r'(?:src|href)="([^"]+)"')


def test_explore_writes_a_self_contained_deterministic_folder(release, tmp_path):
    out = explore(release, tmp_path / "x")
    html = (out / "index.html").read_text()
    references = LOCAL_REFERENCE.findall(html)
    assert set(references) >= {"explorer.css", "explorer.js", "data/release.js", "plotly.min.js"}
    for reference in references:          # every asset is a file of the folder
        assert "//" not in reference and ":" not in reference.split("#")[0], reference
        if not reference.startswith("#"):
            assert (out / reference).is_file(), reference
    script = (out / "explorer.js").read_text()
    assert not re.search(r"https?://", script + (out / "explorer.css").read_text())
    assert '"data/" + name + ".js"' in script        # the data files it loads lazily
    assert {p.name for p in (out / "data").iterdir()} == {"release.js", f"u_{STATE}.js",
                                                           f"u_{INSTITUTION}.js"}
    assert (out / "plotly.min.js").read_bytes() == page_files()["plotly.min.js"].read_bytes()
    assert (out / "plotly.min.js").stat().st_nlink == 1          # a copy, not the package's file
    again = explore(release, tmp_path / "y")
    assert all((out / p.relative_to(again)).read_bytes() == p.read_bytes()
               for p in again.rglob("*") if p.is_file())
    facts = json.loads((out / "data" / "release.js").read_text().split(",", 1)[1].rsplit(");", 1)[0])
    assert facts["board"] is False


def test_release_explorers_public_without_board_internal_with(release):
    public, internal = write_release_explorers(release)
    assert public == release / "public" / EXPLORER and internal == release / "internal" / EXPLORER
    assert not (public / "data" / "board.js").exists() and (internal / "data" / "board.js").is_file()
    shared = internal / "data" / f"u_{INSTITUTION}.js"
    assert shared.read_bytes() == (public / "data" / f"u_{INSTITUTION}.js").read_bytes()


def test_the_command_refuses_what_it_cannot_do(release, tmp_path, capsys):
    from pseo_das.cli import main

    def run(*args: str) -> int:
        with pytest.raises(SystemExit) as stop:
            main(["explore", *args])
        return stop.value.code

    assert run(str(release), "--out", str(tmp_path / "x"), "--board") == 0
    assert "open " in capsys.readouterr().out
    assert run(str(release), "--out", str(tmp_path / "x")) == 2
    assert "already exists" in capsys.readouterr().err
    public_table(release, "pseof_all.csv").unlink()
    assert run(str(release), "--out", str(tmp_path / "z")) == 2
    err = capsys.readouterr().err
    assert "pseof_all.csv: not in" in err and "Traceback" not in err
    assert not (tmp_path / "z").exists() and not list(tmp_path.glob(".z*"))
    with pytest.raises(ExplorerError, match="not a release folder"):
        explore(tmp_path / "nothing", tmp_path / "n")
    assert issubclass(ExplorerInputError, ExplorerError.__mro__[1])   # PseoDasError


# ---- system tests: the session's releases (conftest.py) --------------------------------

def _data_file(path: Path):
    return json.loads(path.read_text().split(",", 1)[1].rsplit(");", 1)[0])


def test_every_release_writes_explorers_holding_the_published_values(releases):
    root, _ = releases
    release = root / "a"
    public, internal = release / "public" / EXPLORER, release / "internal" / EXPLORER
    assert (public / "index.html").is_file() and not (public / "data" / "board.js").exists()
    assert _data_file(internal / "data" / "board.js")["accuracy"]
    manifest = json.loads((release / "internal" / "manifest.json").read_text())["files"]
    assert f"public/{EXPLORER}/index.html" in manifest and f"internal/{EXPLORER}/data/board.js" in manifest
    pseoe = pd.read_csv(public_table(release, "pseoe_all.csv"), dtype=str, keep_default_na=False)
    units = {u: _data_file(public / "data" / f"u_{u}.js") for u in pseoe["institution"].unique()}
    checked = 0
    for row in pseoe.itertuples(index=False):
        values = units[row.institution]["earnings"][f"{row.degree_level}|{row.cipcode}|{row.grad_cohort}"]
        for k in (1, 5, 10):
            flag, shown = getattr(row, f"status_y{k}_earnings"), field(values, f"y{k}_p50_earnings")
            expected = {"1": int(getattr(row, f"y{k}_p50_earnings") or -1), "5": SUPPRESSED}.get(flag)
            assert shown == expected, (row, k)
            checked += 1
    assert checked == 3 * len(pseoe)
    pseof = pd.read_csv(public_table(release, "pseof_all.csv"), dtype=str, keep_default_na=False,
                        usecols=list(layout(Product.PSEOF).identifiers) + ["y1_grads_emp", "status_y1_grads_emp"])
    national = pseof[(pseof["geo_level"] == "N") & (pseof["industry"] == "00")]
    for row in national.sample(200, random_state=1).itertuples(index=False):
        shown = units[row.institution]["flows"][f"{row.degree_level}|{row.cipcode}|{row.grad_cohort}"]["y1"]["emp"][0]
        assert shown == (int(row.y1_grads_emp) if row.status_y1_grads_emp == "1" else
                         SUPPRESSED if row.status_y1_grads_emp == "5" else None)
    # the explorer adds files; the tables are those of the rerun, byte for byte
    again = root / "a_again"
    for path in public.rglob("*"):
        if path.is_file():
            assert path.read_bytes() == (again / path.relative_to(release)).read_bytes(), path
    assert np.all([not p.name.endswith((".csv", ".gz", ".txt", ".xlsx", ".parquet"))
                   for p in public.rglob("*")])


def test_pseoh_as_written_is_the_file_read_back(release):
    """A release hands the explorer the table pseoh_all is written from (not read back):
    the same frame as the file read, and the same data, for a table typed as a release's
    (codes as text, as categories and as integers)."""
    from pseo_das.schemas.distribution import TableFormat
    from pseo_das.tasks.publication.document_context import HISTOGRAMS_FILE
    from pseo_das.tasks.publication.explorer_data import HistogramUnits, _as_read, _read_codes
    from pseo_das.tasks.publication.assemble import write_pseoh
    from pseo_das.tasks.earnings.earnings_tables import (BIN_COLUMNS, IDENTIFIERS,
                                                         HistogramTable)
    path = public_table(release, HISTOGRAMS_FILE)
    frame = pd.read_csv(path, dtype=str, keep_default_na=False)
    frame = frame.astype({c: "int64" for c in ("years_after", "bin", "bin_lower", "bin_upper",
                                               "noisy_count", "grad_cohort_years")}
                         | {"institution": "category"})
    frame["grad_cohort"] = 2016
    # written as a release writes it; what the release keeps of it: its histograms
    n_bins = frame["bin"].max()     # each histogram's rows in bin order, as written
    table = HistogramTable(
        frame.iloc[::n_bins][IDENTIFIERS + ["years_after"]].reset_index(drop=True),
        frame["noisy_count"].to_numpy().reshape(-1, n_bins),
        frame.iloc[:n_bins][BIN_COLUMNS].reset_index(drop=True))
    histograms = write_pseoh(table, release / "public", TableFormat.CSV_GZ, False)[1]
    identifiers = list(layout(Product.PSEOE).identifiers)
    pd.testing.assert_frame_equal(_as_read(frame, identifiers), _read_codes(path, identifiers))
    assert explorer_data(release / "public", pseoh=histograms) == explorer_data(release / "public")
    assert histograms.rows == len(frame) and len(histograms) > 1
    read_back = HistogramUnits(_read_codes(path, identifiers))     # and in the same order
    assert [(unit, list(histograms[unit].items())) for unit in histograms] == \
        [(unit, list(read_back[unit].items())) for unit in read_back]


def test_pseoe_as_written_gives_the_explorer_of_the_file_read_back(release):
    """A release hands the explorer the table pseoe_all is written from (text codes,
    nullable integers for the values, integer flags), not the file read back: the same
    explorer data."""
    from pseo_das.tasks.publication.explorer_data import _as_read, _read_codes
    path = public_table(release, Product.PSEOE.file_name)
    frame = pd.read_csv(path, dtype=str, keep_default_na=False)
    flags = [c for c in frame.columns if c.startswith("status_")]
    values = [c for c in frame.columns if c not in flags and c[:1] == "y"]
    frame = frame.astype({c: "int64" for c in flags + ["agg_level_pseo", "grad_cohort_years"]})
    frame[values] = frame[values].replace("", None).astype("Int64")
    assert frame[values].isna().any().any() and frame["y1_p50_earnings"].notna().any()
    assert explorer_data(release / "public", pseoe_written=frame) == \
        explorer_data(release / "public")
    identifiers = list(layout(Product.PSEOE).identifiers)
    as_read, read = _as_read(frame, identifiers), _read_codes(path, identifiers)
    assert list(as_read.columns) == list(read.columns)
    for column in identifiers:
        if column in read:
            assert list(as_read[column].cat.categories) == list(read[column].cat.categories)


@pytest.mark.parametrize("categorical", [False, True])
def test_neighbouring_institutions_with_the_same_cell_keep_their_own_histograms(categorical):
    """Two institutions next to each other whose histograms have the same degree, field,
    cohort and years after: each unit gets its own bins (a national release had 14 such
    pairs; their histograms were once merged into the first institution's)."""
    from pseo_das.tasks.publication.explorer_data import HistogramUnits
    rows = [{"institution": inst, "degree_level": "05", "cipcode": "07", "grad_cohort": "0000",
             "years_after": "1", "bin": b, "bin_lower": 100 * b, "bin_upper": 100 * (b + 1),
             "noisy_count": count}
            for inst, counts in (("00588900", [3, 4]), ("00591200", [5, 6])) for b, count in
            enumerate(counts)]
    pseoh = pd.DataFrame(rows)
    if categorical:
        pseoh = pseoh.astype({c: "category" for c in pseoh.columns if c != "noisy_count"})
    assert HistogramUnits(pseoh) == {"00588900": {"05|07|0000|1": [3, 4]},
                                      "00591200": {"05|07|0000|1": [5, 6]}}


def test_unit_files_text_is_json_dumps_text_of_their_values():
    """A unit file's text, its flows written from the integers (`UnitData.text`), is
    json.dumps' text of its values: suppressed and not-available values, destinations
    without a row (null), a cell whose sector flows are all 0 (empty lists), a unit without
    flows; years after as json.dumps sorts them ("y1", "y10", "y5")."""
    from pseo_das.tasks.publication.explorer_data import FlowCells, FlowColumns, UnitData
    cells = FlowCells(FlowColumns(["11", "23"], ["1", "2"]))
    # destinations: 0-2 the nation (all industries, 11, 23), 3-5 division 1, 6-8 division 2
    flows = {("A", "05", "11", "2016"): [9, 4, 5, 6, "s", 6, 3, 0, 3],
             ("A", "05", "00", "0000"): [12, 12, 0],        # no division rows
             ("B", "05", "00", "0000"): [0, 0, 0, 0, 0, 0, None, 0, 0]}
    origins = list(flows)
    of_row = [n for n, values in enumerate(flows.values()) for _ in values]
    where = [d for values in flows.values() for d in range(len(values))]
    rows = {}
    for k in (1, 5, 10):
        for measure in ("grads_emp", "grads_emp_instate", "grads_nme"):
            shown = [v * k if isinstance(v, int) and (measure != "grads_nme" or d == 0)
                     else None if measure == "grads_nme" or v is None else v
                     for values in flows.values() for d, v in enumerate(values)]
            rows[f"y{k}_{measure}"] = [v if isinstance(v, int) else np.nan for v in shown]
            rows[f"status_y{k}_{measure}"] = [1 if isinstance(v, int) else 5 if v == "s"
                                              else -1 for v in shown]
    cells.add(origins, np.array(of_row), np.array(where), pd.DataFrame(rows))

    def years(cell):
        return {f"y{k}": cell(k) for k in (1, 5, 10)}
    expected = {
        "A": {"05|11|2016": years(lambda k: {
                  "emp": [9 * k, 4 * k, 5 * k, 6 * k, 3 * k], "instate": [9 * k, 4 * k, 5 * k],
                  "nme": 9 * k, "sectors": [4, SUPPRESSED, 5, 6 * k, 8, 3 * k]}),
              "05|00|0000": years(lambda k: {
                  "emp": [12 * k, 12 * k, 0, None, None], "instate": [12 * k, 12 * k, 0],
                  "nme": 12 * k, "sectors": [4, None, 5, None, 7, None, 8, None]})},
        "B": {"05|00|0000": years(lambda k: {"emp": [0, 0, 0, 0, None], "instate": [0, 0, 0],
                                              "nme": 0, "sectors": []})},
        "C": {}}
    units = UnitData(["A", "B", "C"], {"earnings": {"A": {"05|00|0000": [3, SUPPRESSED, None]}},
                                       "histograms": {"C": {"05|00|0000|1": [1, -2]}},
                                       "flows": cells.units()})
    for unit, unit_flows in expected.items():
        assert units[unit]["flows"] == unit_flows
        assert units.text(unit) == json.dumps(units[unit], sort_keys=True, separators=(",", ":"))


def _earnings_cells_oracle(pseoe: pd.DataFrame) -> dict[str, dict[str, list]]:
    """The explorer's earnings cells built one Python list per row (as the explorer did
    before `EarningsUnits`): unit -> "degree|cipcode|cohort" -> [cohort years, earnings and
    IPEDS counts (the number where published, "s" where suppressed, None otherwise),
    IPEDS flags as text]; a key twice in a unit keeps its last row."""
    from pseo_das.tasks.publication.explorer_data import IPEDS_FIELDS, _status_of, flagged
    status = _status_of(Product.PSEOE)

    def shown(field):
        numbers = flagged(pseoe[field], pseoe[status[field]])
        return [SUPPRESSED if n == -5 else None if n < 0 else int(n) for n in numbers]
    columns = [shown(f) for f in EARNINGS_FIELDS + IPEDS_FIELDS]
    flags = [pseoe[status[f]].astype(int).astype(str).tolist() for f in IPEDS_FIELDS]
    units: dict[str, dict[str, list]] = {}
    for n, row in enumerate(pseoe.itertuples(index=False)):
        key = f"{row.degree_level}|{row.cipcode}|{row.grad_cohort}"
        units.setdefault(str(row.institution), {})[key] = \
            [int(row.grad_cohort_years)] + [c[n] for c in columns] + [f[n] for f in flags]
    return units


def test_earnings_units_are_the_cells_each_row_gives(release):
    """`EarningsUnits` (each cell's JSON text built by columns) holds what one Python list
    per row gives: every unit's text is the JSON of its cells, with published, suppressed
    and unavailable values, and a cell key met twice in a unit keeps its last row."""
    from pseo_das.tasks.publication.explorer_data import EarningsUnits, _read_codes, json_text
    identifiers = list(layout(Product.PSEOE).identifiers)
    pseoe = _read_codes(public_table(release, Product.PSEOE.file_name), identifiers)
    twice = pd.concat([pseoe, pseoe.iloc[:1].assign(grad_cohort_years=9)], ignore_index=True)
    for frame in (pseoe, twice):
        oracle, units = _earnings_cells_oracle(frame), EarningsUnits(frame)
        assert sorted(units) == sorted(oracle) and len(units) == len(oracle) >= 2
        for unit in oracle:
            assert units.text(unit) == json_text(oracle[unit]) and units[unit] == oracle[unit]
    shown = [v for cells in oracle.values() for cell in cells.values() for v in cell[1:]]
    assert SUPPRESSED in shown and None in shown and any(isinstance(v, int) for v in shown)
    assert oracle[next(iter(oracle))][next(iter(oracle[next(iter(oracle))]))][0] == 9
