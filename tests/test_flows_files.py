"""write_pseof on a hand-built flows table, several chunks: pseof_all, its state copies (cut
from pseof_all's text) and what it hands on (the explorer's flows) are those of the file."""
from __future__ import annotations

import dataclasses
import json

import numpy as np
import pandas as pd
import pytest

import pseo_das.tasks.employment_flows.division_flows as division_flows
from pseo_das.schemas.distribution import TableFormat
from pseo_das.schemas.pseo_layout import Product, layout
from pseo_das.tasks.employment_flows.division_flows import (FlowsRelease, PublishedFlowsChecks,
                                                            origin_tables, pseof_parts)
from pseo_das.tasks.publication.explorer_data import (ALL_INDUSTRIES, NATION, FlowCells, FlowColumns,
                                                      _read_codes, flow_cells)
import pseo_das.tasks.publication.flows_files as flows_files
from pseo_das.tasks.publication.flows_files import flow_columns, write_pseof
from pseo_das.tasks.publication.metadata_files import row_states
from pseo_das.tasks.publication.parquet_files import write_parquet_copy
from pseo_das.schemas.table_package import public_table_fields
from pseo_das.tasks.publication.release_files import write_code_table
from tests.test_division_flows import EARLY, FLOWS, LATE, table

STATES = {"00000001": "08", "00000002": "49"}     # institution -> state FIPS


@pytest.fixture
def written(tmp_path, monkeypatch):
    chunks = []

    def small_chunks(parts):                    # one origin cell a chunk
        for chunk in division_flows.pseof_chunks(parts, 1):
            chunks.append(chunk)
            yield chunk
    monkeypatch.setattr(flows_files, "pseof_chunks", small_chunks)
    origins = origin_tables(FLOWS, np.zeros((3, 9), bool))
    parts = pseof_parts(origins)
    flows = FlowsRelease([FLOWS], origins, parts, 0, [], {}, [], {})
    public = tmp_path / "public"
    (public / "all").mkdir(parents=True)
    out = write_pseof(public, flows, STATES, {"08", "49", "06"}, PublishedFlowsChecks(),
                      TableFormat.CSV_GZ, parquet=True)
    assert len(chunks) > len(parts)
    return public, out


def test_state_copies_are_the_rows_of_their_state(written, tmp_path):
    public, out = written
    pseof = pd.read_csv(public / "all" / "pseof_all.csv.gz", dtype=str, keep_default_na=False)
    assert out.all_rows == len(pseof) > 200
    state = row_states(pseof, STATES).to_numpy()
    assert set(state) == {"08", "49"}
    assert set(out.rows) == {"all/pseof_all.csv.gz", "co/pseof_co.csv.gz", "ut/pseof_ut.csv.gz"}
    for fips, st in (("08", "co"), ("49", "ut")):
        alone = tmp_path / f"alone_{st}.csv.gz"
        write_code_table(pseof[state == fips], alone)
        assert (public / st / f"pseof_{st}.csv.gz").read_bytes() == alone.read_bytes(), st
        assert out.rows[f"{st}/pseof_{st}.csv.gz"] == int((state == fips).sum())


def test_explorer_flows_gathered_while_writing_are_those_read_from_the_file(written):
    public, out = written
    pseof = _read_codes(public / "all" / "pseof_all.csv.gz",
                        list(layout(Product.PSEOE).identifiers))
    columns = FlowColumns(sorted(set(pseof["industry"].cat.categories) - {ALL_INDUSTRIES}),
                          sorted(set(pseof["geography"].cat.categories) - {NATION[1]}))
    gathered = out.explorer_flows
    assert gathered.columns == columns and gathered.rows == len(pseof)
    assert gathered.cipcodes == set(pseof["cipcode"].cat.categories)
    units = gathered.units()
    assert units == flow_cells(pseof, columns)
    assert set(units) == {"00000001", "00000002", "08"}


def _shown(value: str, flag: str):
    return int(value) if flag == "1" else "s" if flag == "5" else None


def test_explorer_flows_hold_each_national_rows_values(written):
    """Independently of flow_cells: each national row's employed, in-state and
    non-employed values (as the page shows them) in its cell's arrays."""
    public, out = written
    pseof = pd.read_csv(public / "all" / "pseof_all.csv.gz", dtype=str, keep_default_na=False)
    units, industries = out.explorer_flows.units(), [ALL_INDUSTRIES] + out.explorer_flows.columns.sectors
    checked = 0
    for row in pseof[pseof["geo_level"] == "N"].itertuples(index=False):
        cell = units[row.institution][f"{row.degree_level}|{row.cipcode}|{row.grad_cohort}"]
        at = industries.index(row.industry)
        for k in (1, 5, 10):
            year = cell[f"y{k}"]
            assert year["emp"][at] == _shown(getattr(row, f"y{k}_grads_emp"),
                                             getattr(row, f"status_y{k}_grads_emp"))
            assert year["instate"][at] == _shown(getattr(row, f"y{k}_grads_emp_instate"),
                                                 getattr(row, f"status_y{k}_grads_emp_instate"))
            if at == 0:
                assert year["nme"] == _shown(getattr(row, f"y{k}_grads_nme"),
                                             getattr(row, f"status_y{k}_grads_nme"))
            checked += 1
    assert checked > 100


def test_the_parquet_copy_written_as_the_rows_go_by_is_that_of_the_file(written, tmp_path):
    """The same bytes as the copy converted from the CSV file (nulls, codes as text,
    "0000" cohorts as integers)."""
    public, out = written
    assert out.parquet_rows == {"all/parquet/pseof_all.parquet": out.all_rows}
    from_file = tmp_path / "from_file.parquet"
    assert write_parquet_copy(public / "all" / "pseof_all.csv.gz", from_file,
                              public_table_fields()["pseof_all.csv"]) == out.all_rows
    assert (public / "all" / "parquet" / "pseof_all.parquet").read_bytes() == from_file.read_bytes()


def test_explorer_flows_of_chunks_of_several_cells_are_those_of_the_file_read_back(tmp_path):
    """FlowCells.add_rows (a release's path: the Arrow columns of chunks of several origin
    cells) gathers what flow_cells gathers from the file of the same rows read back:
    suppressed division flows, years after that some cells do not have (not available),
    non-employment on the national all-industries rows only."""
    later = dataclasses.replace(table([LATE, EARLY], [2010, 2001], ["00000002", "00000001"]),
                                tabulation_id="flows.I.cipA.y5", years_after=5)
    hidden = np.zeros((3, 9), bool)
    hidden[0, 7] = hidden[2, 8] = True                     # suppressed division flows
    parts = pseof_parts(origin_tables(FLOWS, hidden) + origin_tables(later, hidden[1:]))
    columns = flow_columns(parts)
    gathered, chunks = FlowCells(columns), list(division_flows.pseof_chunks(parts, 400))
    assert any(rows.num_rows > part.rows_per_cell for part, _, rows in chunks)
    for part, _, rows in chunks:
        gathered.add_rows(rows, part.rows_per_cell)
    path = tmp_path / "pseof_all.csv"
    write_code_table((rows for _, _, rows in chunks), path, list(layout(Product.PSEOF).columns))
    pseof = _read_codes(path, list(layout(Product.PSEOE).identifiers))
    read = flow_cells(pseof, columns)
    units = gathered.units()
    assert units == read and [units.text(u) for u in units] == [read.text(u) for u in read]
    assert gathered.rows == len(pseof) and gathered.cipcodes == {"00"}
    shown = json.dumps(dict(units))
    assert '"s"' in shown and "null" in shown and len(units) == 3
