"""The release's optional one-file products as plug-ins of the writer: the cell statistics
(pseom_all.csv) and the employer-side table (pseoemp_all.csv). Each says which section of
the documents it fills, how many noisy values it drew (the ledger check) and writes its
file; `write_release` loops over them and names none. Privacy cost: none (post-processing
of stored noisy values).
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from pseo_das.config import ReleaseConfig
from pseo_das.schemas.distribution import published_table
from pseo_das.tasks.earnings.cell_statistics import (CELL_STATISTICS_FILE, NoisyCellStatistics,
                                                     cell_statistics_context,
                                                     cell_statistics_table)
from pseo_das.tasks.employment_flows.employer_table import NoisyEmployerTable
from pseo_das.tasks.inputs.constant_dollars import DollarYears
from pseo_das.tasks.privacy.ledger import LedgerEntry
from pseo_das.tasks.publication.employer_table_file import (EMPLOYER_TABLE_FILE,
                                                            checked_employer_table_file,
                                                            employer_table_context)
from pseo_das.tasks.publication.release_files import write_code_table


@dataclass(frozen=True)
class WrittenTable:
    """A side table as written: its file, rows, the documents' section and its checks."""
    file_name: str
    rows: int
    context: dict | None
    checks: list[dict]


class SideTable(Protocol):
    """An optional product published as one file of the public folder."""

    section: str                 # the documents' context key (None there when not published)

    @property
    def entries(self) -> list[LedgerEntry]:
        """Its ledger entries (after the flows' in the ledger)."""
        ...

    @property
    def drawn(self) -> int:
        """The noisy values it drew (`ledger_checks`)."""
        ...

    def write(self, public: Path, cfg: ReleaseConfig, dollars: dict | None) -> WrittenTable:
        """Write its file into `public`."""
        ...


SECTIONS = ("cell_statistics", "employer_table")   # every side table's documents' key


@dataclass(frozen=True)
class CellStatisticsFile:
    """pseom_all.csv (docs/method/cell-statistics.md), in the publication year's dollars."""
    statistics: NoisyCellStatistics
    section = "cell_statistics"

    @property
    def entries(self) -> list[LedgerEntry]:
        return self.statistics.entries

    @property
    def drawn(self) -> int:
        return int(self.statistics.table["noisy_count"].notna().sum())

    def write(self, public: Path, cfg: ReleaseConfig, dollars: dict | None) -> WrittenTable:
        factor = float(DollarYears(**dollars).factor) if dollars else 1.0
        pseom = cell_statistics_table(self.statistics, factor)
        write_code_table(pseom, published_table(public, CELL_STATISTICS_FILE, cfg.publication.table_format))
        return WrittenTable(CELL_STATISTICS_FILE, len(pseom), cell_statistics_context(
            self.statistics, pseom, factor, dollars["publication_year"] if dollars else None), [])


@dataclass(frozen=True)
class EmployerTableFile:
    """pseoemp_all.csv, the employer-side table, checked by its output schema."""
    table: NoisyEmployerTable
    section = "employer_table"

    @property
    def entries(self) -> list[LedgerEntry]:
        return list(self.table.entries)

    @property
    def drawn(self) -> int:
        return self.table.drawn

    def write(self, public: Path, cfg: ReleaseConfig, dollars: dict | None) -> WrittenTable:
        pseoemp, check = checked_employer_table_file(self.table, cfg.cells.years_after)
        write_code_table(pseoemp, published_table(public, EMPLOYER_TABLE_FILE, cfg.publication.table_format))
        return WrittenTable(EMPLOYER_TABLE_FILE, len(pseoemp),
                            employer_table_context(cfg, self.table, len(pseoemp)), [check])


def side_tables(cell_statistics: NoisyCellStatistics | None,
                employer_table: NoisyEmployerTable | None) -> list[SideTable]:
    """The side tables a release publishes, in ledger order."""
    return ([CellStatisticsFile(cell_statistics)] if cell_statistics is not None else []) + \
        ([EmployerTableFile(employer_table)] if employer_table is not None else [])
