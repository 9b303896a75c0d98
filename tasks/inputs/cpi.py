"""The BLS consumer price index (CPI-U, U.S. city average, all items: series CUUR0000SA0,
annual averages) for constant dollars. Privacy cost: none (public data).

Read from a file in the BLS flat-file layout (`cu.data.*`: tab-separated, padded), either
the packaged extract (pseo_das/reference/bls/, 1997-2024) or a real download such as
cu.data.1.AllItems (every series and period), from which only the annual averages of
CUUR0000SA0 are kept; only that series' rows are checked. Values
are kept exact (Decimal, as published to three decimals).
"""
from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path


from pseo_das.schemas.cpi import ANNUAL_AVERAGE, CPI_COLUMNS, CPI_U_SERIES, cpi_schema
from pseo_das.schemas.written_hashes import read_sha256
from pseo_das.tasks.inputs.ingest import InputValidationError, read_csv
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
    raw = raw[list(CPI_COLUMNS)].apply(lambda s: s.str.strip())
    # the whole cu.data.1.AllItems holds every area's series: only CPI-U's rows are read
    # and checked (rows keep their numbers in the file)
    rows = validate(path, raw[raw["series_id"] == CPI_U_SERIES], cpi_schema())
    annual = rows[rows["period"] == ANNUAL_AVERAGE]
    if annual.empty:
        raise InputValidationError(f"{path}: no annual average ({ANNUAL_AVERAGE}) of series "
                                   f"{CPI_U_SERIES} (CPI-U, U.S. city average, all items)")
    values = {int(y): Decimal(v) for y, v in zip(annual["year"], annual["value"])}
    implausible = implausible_values(values)
    if implausible:
        raise InputValidationError(
            f"{path}: implausible CPI-U annual averages ({CPI_U_SERIES}, {ANNUAL_AVERAGE}): "
            + "; ".join(implausible[:5]) + (" ..." if len(implausible) > 5 else "")
            + ". The real series is positive and moves by "
            + ", ".join(f"{_percent(low)} to {_percent(high)} a year from {first}"
                        for first, low, high in YEAR_ON_YEAR)
            + "; check the file (nothing was read or spent)")
    return ConsumerPrices(dict(sorted(values.items())), read_sha256(path), path)


# The year-over-year ratio of the real CPI-U annual averages (BLS, 1913-2024), by era: from
# 1950 between 0.9963 (1955, 2009) and 1.135 (1980); before, between 0.895 (1921) and 1.18
# (1918). A value outside its band (a slipped decimal, a value of another series or base)
# is refused before it scales any earnings.
YEAR_ON_YEAR = ((1950, Decimal("0.99"), Decimal("1.15")), (1913, Decimal("0.85"), Decimal("1.20")))


def _percent(ratio: Decimal) -> str:
    return f"{(ratio - 1) * 100:+.1f}%"


def implausible_values(annual: dict[int, Decimal]) -> list[str]:
    """The annual averages that are not positive, or that differ from the year before
    (compounded over missing years) by more than the real series ever did in their era."""
    problems = [f"{year} = {value}: not positive" for year, value in sorted(annual.items())
                if value <= 0]
    years = sorted(y for y, v in annual.items() if v > 0)
    for before, year in zip(years, years[1:]):
        low, high = next(((low, high) for first, low, high in YEAR_ON_YEAR if year >= first),
                         YEAR_ON_YEAR[-1][1:])
        gap = year - before
        ratio = annual[year] / annual[before]
        if not low ** gap <= ratio <= high ** gap:
            problems.append(f"{year} = {annual[year]} after {before} = {annual[before]} "
                            f"({_percent(ratio)})")
    return problems



