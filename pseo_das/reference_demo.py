"""SYNTHETIC demo versions of the public reference inputs of the flows post-processing,
in the real public layouts (see tasks/reference_inputs.py and pseo_das/reference/README.md).

The numbers are made up, only meant to be plausible: they are NOT LEHD or BLS data.

* J2J (j2jod layout, 2015 Q1-Q2): quarterly job-to-job hires out of a state are 4% of its
  employment (employment ~ 45% of the population); most stay in the state, the rest go to
  other states by a gravity model (destination population / distance between approximate
  population centres). EE is 62% of the hires, AQHire the rest. Pairs with fewer than
  MIN_PAIR_HIRES hires in a quarter are left out, as sparse files do (the loader reads an
  absent pair as 0). The earnings columns are left empty (status flag -1, not
  available) to keep the file small.
* QCEW (annual-average layout, 2015): employment by state, NAICS sector and
  ownership from the population and rough national sector shares, with state
  specialisations; public administration (92) is government only, education (61) mostly
  local and state government. Also the statewide total rows (agglvl 50), which the
  loader ignores, and a few suppressed cells (disclosure_code N). The location-quotient
  (lq_*) and over-the-year (oty_*) columns are left empty to keep the file small.
* Coverage: all 51 states 2001-2022, except four covered only from a later year (two in
  the Mountain division) so that some cohorts' division flows are incomplete.

Deterministic: the "noise" is a hash of the row's key, not a random generator, so the
files come out the same byte for byte on every run. Regenerate with
``python -m pseo_das.reference_demo [OUT_DIR]`` (default: pseo_das/reference/).
"""
from __future__ import annotations

import hashlib
import math
import sys
from pathlib import Path

from pseo_das.synth import STATE_POPULATION
from pseo_das.schemas.codes import NAICS_SECTORS, STATE_FIPS

J2J_YEAR, J2J_QUARTERS = 2015, (1, 2)
QCEW_YEARS = (2015,)
MIN_PAIR_HIRES = 60
EMPLOYMENT_PER_PERSON = 0.45
QUARTERLY_J2J_RATE = 0.04
EE_SHARE = 0.62
SEASON = {1: 0.94, 2: 1.0, 3: 1.08, 4: 0.98}
DEMO_AGG_LEVEL = "999999"  # placeholder: the loader selects rows by their identifiers

# Approximate population centres (latitude, longitude), for the gravity model only.
CENTRE = {
    "01": (33.0, -86.8), "02": (61.4, -149.5), "04": (33.4, -112.0), "05": (35.0, -92.4),
    "06": (35.5, -119.4), "08": (39.5, -105.2), "09": (41.5, -72.9), "10": (39.4, -75.6),
    "11": (38.9, -77.0), "12": (27.8, -81.6), "13": (33.4, -84.0), "15": (21.3, -157.9),
    "16": (43.9, -115.4), "17": (41.3, -88.4), "18": (40.0, -86.3), "19": (41.9, -92.9),
    "20": (38.4, -96.8), "21": (37.8, -85.5), "22": (30.7, -91.5), "23": (44.3, -69.8),
    "24": (39.1, -76.8), "25": (42.3, -71.4), "26": (42.9, -84.2), "27": (45.2, -93.5),
    "28": (32.6, -89.6), "29": (38.4, -92.2), "30": (46.7, -110.6), "31": (41.2, -97.4),
    "32": (36.5, -115.4), "33": (43.0, -71.5), "34": (40.4, -74.4), "35": (34.6, -106.3),
    "36": (41.5, -74.6), "37": (35.6, -79.4), "38": (47.4, -99.3), "39": (40.5, -82.7),
    "40": (35.6, -96.8), "41": (44.7, -122.6), "42": (40.5, -77.1), "44": (41.8, -71.4),
    "45": (34.0, -81.0), "46": (44.0, -98.5), "47": (35.8, -86.4), "48": (30.9, -97.4),
    "49": (40.4, -111.9), "50": (44.1, -72.8), "51": (38.0, -77.8), "53": (47.3, -121.6),
    "54": (38.8, -80.8), "55": (43.7, -89.0), "56": (42.6, -107.0),
}

# Rough national employment shares by sector (99 = unclassified) and the ownership split
# (own_code: share) of each sector; sectors not listed are all private (own_code 5).
SECTOR_SHARE = {
    "11": 0.009, "21": 0.005, "22": 0.004, "23": 0.052, "31-33": 0.085, "42": 0.040,
    "44-45": 0.107, "48-49": 0.038, "51": 0.020, "52": 0.042, "53": 0.015, "54": 0.066,
    "55": 0.016, "56": 0.063, "61": 0.088, "62": 0.140, "71": 0.018, "72": 0.094,
    "81": 0.030, "92": 0.050, "99": 0.0005,
}
OWNERSHIP = {
    "22": {"3": 0.25, "5": 0.75},
    "48-49": {"1": 0.15, "5": 0.85},
    "61": {"2": 0.20, "3": 0.55, "5": 0.25},
    "62": {"2": 0.05, "3": 0.05, "5": 0.90},
    "71": {"3": 0.10, "5": 0.90},
    "92": {"1": 0.30, "2": 0.25, "3": 0.45},
}
SPECIALISATION = {  # sector -> {state: multiplier}
    "21": {"02": 6.0, "22": 3.0, "38": 6.0, "40": 4.0, "48": 4.0, "54": 4.0, "56": 9.0},
    "51": {"06": 1.6, "53": 1.7},
    "52": {"09": 1.4, "10": 1.5, "36": 1.5},
    "72": {"15": 1.8, "32": 2.2},
    "92": {"11": 3.0, "24": 1.4, "51": 1.4},
    "11": {"06": 2.0, "19": 1.8, "38": 2.0, "46": 2.0},
}
SUPPRESSED = {("10", "21"), ("44", "21"), ("11", "11")}  # (state, sector) private rows: "N"
LATE_COVERAGE = {"04": 2012, "49": 2015, "13": 2015, "22": 2012}  # Mountain x2, S. Atl., WSC
COVERAGE_YEARS = (2001, 2022)

J2J_IDENTIFIERS = ("periodicity", "seasonadj", "geo_level", "geography", "ind_level", "industry",
                   "ownercode", "sex", "agegrp", "race", "ethnicity", "education", "firmage",
                   "firmsize", "year", "quarter", "agg_level", "geo_level_orig", "geography_orig",
                   "ind_level_orig", "industry_orig", "ownercode_orig", "firmage_orig",
                   "firmsize_orig")
J2J_INDICATORS = ("EE", "AQHire", "EES", "AQHireS", "EESEarn_Orig", "EESEarn_Dest",
                  "AQHireSEarn_Orig", "AQHireSEarn_Dest")
J2J_HEADER = J2J_IDENTIFIERS + J2J_INDICATORS + tuple(f"s{c}" for c in J2J_INDICATORS)
QCEW_HEADER = (
    "area_fips", "own_code", "industry_code", "agglvl_code", "size_code", "year", "qtr",
    "disclosure_code", "annual_avg_estabs", "annual_avg_emplvl", "total_annual_wages",
    "taxable_annual_wages", "annual_contributions", "annual_avg_wkly_wage", "avg_annual_pay",
    "lq_disclosure_code", "lq_annual_avg_estabs", "lq_annual_avg_emplvl", "lq_total_annual_wages",
    "lq_taxable_annual_wages", "lq_annual_contributions", "lq_annual_avg_wkly_wage",
    "lq_avg_annual_pay", "oty_disclosure_code", "oty_annual_avg_estabs_chg",
    "oty_annual_avg_estabs_pct_chg", "oty_annual_avg_emplvl_chg", "oty_annual_avg_emplvl_pct_chg",
    "oty_total_annual_wages_chg", "oty_total_annual_wages_pct_chg", "oty_taxable_annual_wages_chg",
    "oty_taxable_annual_wages_pct_chg", "oty_annual_contributions_chg",
    "oty_annual_contributions_pct_chg", "oty_annual_avg_wkly_wage_chg",
    "oty_annual_avg_wkly_wage_pct_chg", "oty_avg_annual_pay_chg", "oty_avg_annual_pay_pct_chg")
QCEW_TEXT = {"area_fips", "own_code", "industry_code", "agglvl_code", "size_code", "year", "qtr",
             "disclosure_code", "lq_disclosure_code", "oty_disclosure_code"}
SECTOR_PAY = {  # rough average weekly wage by sector (dollars)
    "11": 700, "21": 1900, "22": 1950, "23": 1200, "31-33": 1250, "42": 1400, "44-45": 600,
    "48-49": 1000, "51": 2000, "52": 1900, "53": 1100, "54": 1850, "55": 2200, "56": 750,
    "61": 950, "62": 950, "71": 700, "72": 400, "81": 750, "92": 1150, "99": 900,
}


def jitter(*key) -> float:
    """A deterministic number in [-1, 1) from the key (the demo's only "noise")."""
    digest = hashlib.sha256("|".join(map(str, key)).encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2 ** 63 - 1.0


def distance_km(a: str, b: str) -> float:
    (lat1, lon1), (lat2, lon2) = (map(math.radians, CENTRE[s]) for s in (a, b))
    h = math.sin((lat2 - lat1) / 2) ** 2 + math.cos(lat1) * math.cos(lat2) * math.sin((lon2 - lon1) / 2) ** 2
    return 2 * 6371.0 * math.asin(math.sqrt(h))


def employment(state: str) -> float:
    return STATE_POPULATION[state] * 1e6 * EMPLOYMENT_PER_PERSON


def j2j_hires() -> dict[tuple[str, str], float]:
    """Expected quarterly job-to-job hires (before seasonality) by (origin, destination)."""
    hires = {}
    for origin in STATE_FIPS:
        total = employment(origin) * QUARTERLY_J2J_RATE
        out_share = 0.06 + 0.08 / math.sqrt(STATE_POPULATION[origin])
        pull = {d: STATE_POPULATION[d] / (1.0 + distance_km(origin, d) / 200.0) ** 1.6
                for d in STATE_FIPS if d != origin}
        norm = sum(pull.values())
        hires[origin, origin] = total * (1.0 - out_share)
        for destination, weight in pull.items():
            hires[origin, destination] = total * out_share * weight / norm
    return hires


def j2j_rows() -> list[list]:
    rows = []
    for (origin, destination), mean in j2j_hires().items():
        for quarter in J2J_QUARTERS:
            hires = mean * SEASON[quarter] * math.exp(0.1 * jitter("j2j", origin, destination, quarter))
            if hires < MIN_PAIR_HIRES and origin != destination:
                continue
            ee = round(hires * EE_SHARE)
            aq = round(hires) - ee
            ids = ["Q", "U", "S", destination, "A", "00", "A00", "0", "A00", "A0", "A0", "E0", "0",
                   "0", J2J_YEAR, quarter, DEMO_AGG_LEVEL, "S", origin, "A", "00", "A00", "0", "0"]
            counts = [ee, aq, round(0.8 * ee), round(0.7 * aq)]
            rows.append(ids + counts + [""] * 4 + [1] * 4 + [-1] * 4)
    rows.sort(key=lambda r: (r[3], r[18], r[15]))  # destination, origin, quarter
    return rows


def sector_employment(state: str, sector: str, year: int) -> float:
    growth = 1.0 + 0.015 * (year - QCEW_YEARS[0])
    special = SPECIALISATION.get(sector, {}).get(state, 1.0)
    return (employment(state) * SECTOR_SHARE[sector] * special * growth
            * math.exp(0.2 * jitter("qcew", state, sector) + 0.02 * jitter("qcew", state, sector, year)))


def qcew_row(area: str, own: str, industry: str, level: str, year: int, emplvl: float,
             weekly: float, disclosure: str = "") -> list:
    main = [area, own, industry, level, "0", str(year), "A", disclosure]
    if disclosure == "N":
        return main + [0] * 7 + [""] * (len(QCEW_HEADER) - len(main) - 7)
    emplvl = round(emplvl)
    estabs = max(1, round(emplvl / (8 + 12 * (1 + jitter("size", area, industry)))))
    wages = round(emplvl * weekly * 52)
    values = [estabs, emplvl, wages, round(wages * 0.45), round(wages * 0.004), round(weekly),
              round(weekly * 52)]
    return main + values + [""] * (len(QCEW_HEADER) - len(main) - len(values))


def qcew_rows() -> list[list]:
    rows = []
    for year in QCEW_YEARS:
        for state in STATE_FIPS:
            area = f"{state}000"
            total_emp, total_pay = 0.0, 0.0
            sector_rows = []
            for sector in NAICS_SECTORS + ("99",):
                emp = sector_employment(state, sector, year)
                weekly = SECTOR_PAY[sector] * (1 + 0.1 * jitter("wage", state, sector)) * (1.02 ** (year - 2015))
                for own, share in OWNERSHIP.get(sector, {"5": 1.0}).items():
                    disclosure = "N" if own == "5" and (state, sector) in SUPPRESSED else ""
                    sector_rows.append(qcew_row(area, own, sector, "54", year, emp * share,
                                                weekly, disclosure))
                total_emp += emp
                total_pay += emp * weekly
            rows.append(qcew_row(area, "0", "10", "50", year, total_emp, total_pay / total_emp))
            rows.extend(sector_rows)
    return rows


def coverage_rows() -> list[list]:
    return [[s, LATE_COVERAGE.get(s, COVERAGE_YEARS[0]), COVERAGE_YEARS[1]] for s in STATE_FIPS]


def _write(path: Path, header, rows, quoted=frozenset()) -> None:
    """CSV with text codes in quotes (as BLS writes them) when `quoted` names them."""
    with open(path, "w", newline="", encoding="utf-8") as fh:
        fh.write(",".join(f'"{c}"' if quoted else c for c in header) + "\n")
        for row in rows:
            fh.write(",".join(f'"{v}"' if c in quoted else str(v) for c, v in zip(header, row)) + "\n")


def write_demo_reference(out_dir: Path) -> list[Path]:
    """Write the three SYNTHETIC demo reference files into `out_dir`; return their paths."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = [out_dir / "j2j_state_flows.csv", out_dir / "qcew_state_sector.csv",
             out_dir / "state_coverage.csv"]
    _write(paths[0], J2J_HEADER, j2j_rows())
    _write(paths[1], QCEW_HEADER, qcew_rows(), quoted=QCEW_TEXT)
    _write(paths[2], ("state", "first_year", "last_year"), coverage_rows())
    return paths


if __name__ == "__main__":
    target = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).parent / "reference"
    for written in write_demo_reference(target):
        print(f"wrote {written} ({written.stat().st_size:,} bytes)")
