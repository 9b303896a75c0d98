"""The BLS consumer price index (CPI-U, U.S. city average, all items: series CUUR0000SA0,
annual averages) for constant dollars. Privacy cost: none (public data).

Read from a file in the BLS flat-file layout (`cu.data.*`: tab-separated, padded), either
the packaged extract (pseo_das/reference/bls/, 1997-2024) or a real download such as
cu.data.1.AllItems, from which only the annual averages of CUUR0000SA0 are kept. Values
are kept exact (Decimal, as published to three decimals).
"""
from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path


from pseo_das.schemas.cpi import ANNUAL_AVERAGE, CPI_COLUMNS, CPI_U_SERIES, cpi_schema
from pseo_das.tasks.inputs.ingest import InputValidationError, read_csv, sha256_file
from pseo_das.tasks.inputs.reference_inputs import validate

CPI_FILE = "cu.data.annual.AllItems.txt"


def find_cpi(reference_dir: Path | None) -> Path:
    """The CPI file of the reference folder (`bls/cu.data*`, one file), else the packaged
    extract."""
    folder = Path(reference_dir) / "bls" if reference_dir is not None else None
    found = sorted(folder.glob("cu.data*")) if folder is not None and folder.is_dir() else []
    if len(found) > 1:
        raise InputValidationError(f"{folder}: {len(found)} CPI files ({', '.join(p.name for p in found)}); "
                                   "keep the one to use")
    return found[0] if found else default_cpi_path()


def default_cpi_path() -> Path:
    """The packaged extract (real BLS values; see its README)."""
    import pseo_das
    return Path(pseo_das.__file__).parent / "reference" / "bls" / CPI_FILE


@dataclass(frozen=True)
class ConsumerPrices:
    annual: dict[int, Decimal]    # year -> CPI-U annual average
    sha256: str
    path: Path

    def value(self, year: int) -> Decimal:
        self.require([year])
        return self.annual[year]

    def require(self, years) -> None:
        """Refuse, naming them, years the file has no annual average for."""
        missing = sorted({int(y) for y in years} - set(self.annual))
        if missing:
            raise InputValidationError(
                f"{self.path}: no CPI-U annual average ({CPI_U_SERIES}, {ANNUAL_AVERAGE}) for "
                f"{', '.join(map(str, missing[:10]))}" + (" ..." if len(missing) > 10 else "")
                + f"; the file has {min(self.annual)}-{max(self.annual)}: give a BLS file that "
                "covers them")


def read_cpi(path: Path | None = None) -> ConsumerPrices:
    """The CPI-U annual averages of the file at `path` (default: the packaged extract),
    validated; bad rows are named by file, column and row."""
    path = Path(path) if path is not None else default_cpi_path()
    if not path.is_file():
        raise InputValidationError(f"{path}: CPI file not found")
    raw = read_csv(path, None, sep="\t", dtype=str, keep_default_na=False)
    raw.columns = [c.strip() for c in raw.columns]
    missing = [c for c in CPI_COLUMNS if c not in raw.columns]
    if missing:
        raise InputValidationError(f"{path}: missing column(s) {', '.join(missing)}; expected "
                                   "the BLS flat-file layout (series_id, year, period, value, "
                                   "footnote_codes; tab-separated)")
    rows = validate(path, raw[list(CPI_COLUMNS)].apply(lambda s: s.str.strip()), cpi_schema())
    annual = rows[(rows["series_id"] == CPI_U_SERIES) & (rows["period"] == ANNUAL_AVERAGE)]
    if annual.empty:
        raise InputValidationError(f"{path}: no annual average ({ANNUAL_AVERAGE}) of series "
                                   f"{CPI_U_SERIES} (CPI-U, U.S. city average, all items)")
    return ConsumerPrices({int(y): Decimal(v) for y, v in zip(annual["year"], annual["value"])},
                          sha256_file(path), path)



