"""The employment flows files of a release, written in chunks so that memory holds one
chunk of rows, never a whole file: internal/flows_state.parquet (zstd; `read_flows_state`
also reads the flows_state.csv of earlier releases), public pseof_all.csv and each
state folder's pseof_[st].csv (the same rows split by institution state: their lines
of pseof_all's text, formatted once), with the
published flows' checks computed as the rows go by. Privacy cost: none (post-processing of
noisy flows)."""
from __future__ import annotations

import time
from collections.abc import Mapping
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa

from pseo_das.schemas.codes import STATE_POSTAL
from pseo_das.schemas.distribution import ALL_FOLDER, TableFormat, published_name
from pseo_das.schemas.pseo_layout import ALL_INDUSTRIES, Product, TableCheck, layout
from pseo_das.tasks import progress
from pseo_das.tasks.employment_flows.division_flows import (FLOWS_STATE_CSV, FLOWS_STATE_FILE,
                                                            FLOWS_STATE_CODED_SCHEMA,
                                                            FLOWS_STATE_SCHEMA, FlowsRelease,
                                                            PseofPart, PublishedFlowsChecks,
                                                            flows_state_rows, pseof_chunks,
                                                            pseof_frame)
from pseo_das.process_memory import release_arrow_memory, release_unused_memory
from pseo_das.tasks.publication.explorer_data import NATION, FlowCells, FlowColumns
from pseo_das.tasks.publication.parquet_files import ParquetCopyWriter
from pseo_das.tasks.publication.metadata_files import ALL_STATES, row_states, state_file_name
from pseo_das.tasks.publication.release_files import (CodeTableWriter, ParquetTableWriter,
                                                      row_offsets, rows_text)


PROGRESS_EVERY_S = 5.0


@dataclass(frozen=True)
class PseofWritten:
    """What writing pseof_all and its state copies leaves for the rest of the release."""
    rows: dict[str, int]                 # file path relative to public/ -> rows written
    cohorts: dict[str, pd.DataFrame]     # ALL_STATES or state FIPS -> grad_cohort values
    national_rows: pd.DataFrame          # all-fields institution cells by cohort, nation, all industries
    layout_check: TableCheck             # pseof_all's official layout, checked as written
    explorer_flows: FlowCells            # pseof_all's flows as the explorer shows them
    parquet_rows: dict[str, int]         # its Parquet copy (none or one): rows by path

    @property
    def all_rows(self) -> int:
        """The rows of all/pseof_all (the first file of `rows`)."""
        return next(iter(self.rows.values()))


# origin cells of flows_state built at a time: a national block is about a million rows
# (4,096 cells: 4 million rows, and their copies, took a national release's peak RSS from
# 2.91 to 3.40 GB; the file's bytes, not its table, depend on it)
STATE_ROWS_BLOCK_CELLS = 1024


def write_flows_state(path: Path, flows: FlowsRelease, checks: PublishedFlowsChecks) -> int:
    """internal/flows_state.parquet, table by table; each table's division sums go to
    `checks` (what the published division flows are checked against). Returns the rows.
    The code columns are written from their codes (read back as text: `read_flows_state`)."""
    with ParquetTableWriter(path, FLOWS_STATE_CODED_SCHEMA) as writer:
        for table in flows.tables:
            for start in range(0, max(len(table.cells), 1), STATE_ROWS_BLOCK_CELLS):
                state_rows, rows, cols = flows_state_rows(table, start,
                                                          start + STATE_ROWS_BLOCK_CELLS)
                checks.expect_divisions(table, state_rows, rows, cols)
                writer.write(state_rows)
            release_unused_memory()
        return writer.rows


def read_flows_state(internal: Path) -> pd.DataFrame:
    """The flows_state of a release's internal folder: flows_state.parquet, or the
    flows_state.csv of a release made before it (issue 34), read to the same columns and
    types (codes as text, counts as int64). FileNotFoundError if it has neither."""
    internal = Path(internal)
    if (internal / FLOWS_STATE_FILE).is_file():
        return pd.read_parquet(internal / FLOWS_STATE_FILE)
    if (internal / FLOWS_STATE_CSV).is_file():
        return pd.read_csv(internal / FLOWS_STATE_CSV, keep_default_na=False, dtype={
            field.name: str if pa.types.is_string(field.type) else np.int64
            for field in FLOWS_STATE_SCHEMA})
    raise FileNotFoundError(f"{internal}: no {FLOWS_STATE_FILE} (nor {FLOWS_STATE_CSV})")


def write_pseof(public: Path, flows: FlowsRelease, institution_state: Mapping[str, str],
                states: set[str], checks: PublishedFlowsChecks,
                table_format: TableFormat = TableFormat.CSV_GZ,
                parquet: bool = False) -> PseofWritten:
    """`all/pseof_all.csv` and `[st]/pseof_[st].csv` for each state FIPS code in `states`
    (the states with a folder), in `table_format` (gzipped: `.csv.gz`), chunk by chunk; a
    state's file holds its rows in the order of pseof_all (`metadata_files.row_states`).
    Every chunk goes through `checks`, and pseof_all's rows through the official layout
    check (`PseofWritten.layout_check`) and, with `parquet`, to its Parquet copy
    (parquet_files.ParquetCopyWriter)."""
    columns = list(layout(Product.PSEOF).columns)
    all_name = f"{ALL_FOLDER}/{published_name(Product.PSEOF.file_name, table_format)}"
    cohorts: dict[str, set[str]] = {ALL_STATES: set()}
    national = []
    origin_cells = sum(len(origin.ids) for origin in {id(part.origin): part.origin
                                                       for part in flows.pseof}.values())
    explorer_flows = FlowCells(flow_columns(flows.pseof), origin_cells)
    with ExitStack() as files:
        layout_check = TableCheck(Path(all_name).name, Product.PSEOF, columns)
        writers = {ALL_STATES: files.enter_context(CodeTableWriter(public / all_name, columns,
                                                                   layout_check))}
        names = {ALL_STATES: all_name}
        copy = files.enter_context(ParquetCopyWriter(public, Product.PSEOF.file_name)) \
            if parquet else None
        progress(f"writing {all_name} ({flows.n_pseof_rows:,} rows) and its state copies")
        last_note = time.monotonic()
        for part, start, table in pseof_chunks(flows.pseof):
            if time.monotonic() - last_note > PROGRESS_EVERY_S:
                progress(f"writing {all_name}: {writers[ALL_STATES].rows:,} of "
                         f"{flows.n_pseof_rows:,} rows")
                last_note = time.monotonic()
                release_arrow_memory()   # the written chunks' buffers, kept by Arrow's pool
            checks.add(part, start, table)
            if _national_all_fields(part):
                national.append(pseof_frame(table))
            text = writers[ALL_STATES].write(table)      # formatted once: the states' rows too
            explorer_flows.add_rows(table, part.rows_per_cell)
            if copy is not None:
                copy.write(table)
            cell_offsets = row_offsets(text, table.num_rows)[::part.rows_per_cell]
            cells = part.origin.ids.iloc[start:start + table.num_rows // part.rows_per_cell]
            cohorts[ALL_STATES].update(cells["grad_cohort"].unique())
            cell_state = row_states(cells, institution_state).to_numpy()
            for fips in sorted(set(cell_state) & states):
                if fips not in writers:
                    st = STATE_POSTAL[fips].lower()
                    (public / st).mkdir(exist_ok=True)
                    names[fips] = f"{st}/{published_name(state_file_name(Product.PSEOF, fips), table_format)}"
                    writers[fips] = files.enter_context(CodeTableWriter(public / names[fips], columns))
                    cohorts[fips] = set()
                mine = cell_state == fips
                cohorts[fips].update(cells["grad_cohort"][mine].unique())
                writers[fips].write_text(rows_text(text, cell_offsets, mine),
                                         int(mine.sum()) * part.rows_per_cell)
        written = {names[key]: writer.rows for key, writer in writers.items()}
        parquet_rows = {} if copy is None else {copy.name: copy.rows}
    return PseofWritten(
        written, {key: pd.DataFrame({"grad_cohort": sorted(values)}) for key, values in cohorts.items()},
        pd.concat(national, ignore_index=True) if national else pd.DataFrame(columns=columns),
        layout_check, explorer_flows, parquet_rows)


def flow_columns(parts: list[PseofPart]) -> FlowColumns:
    """The sectors and divisions of pseof_all's rows: those of its parts that have rows."""
    geographies = {g for part in parts if part.n_cells for g in part.geographies}
    industries = {i for part in parts if part.n_cells for i in part.industries}
    return FlowColumns(sorted(industries - {ALL_INDUSTRIES}), sorted(geographies - {NATION[1]}))


def _national_all_fields(part) -> bool:
    """The part holding the all-fields institution cells by cohort at the nation, all
    industries: each cell's employed count, which the earnings file's count is compared with."""
    origin = part.origin
    return (origin.inst_level == "I" and origin.cip_level == "A" and origin.by_cohort
            and part.geo_level == "N" and part.ind_level == "A")
