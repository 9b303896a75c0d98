"""The packaged SYNTHETIC demo IPEDS files and the hard-coded CIP transitions
(pseo_das.ipeds_demo, pseo_das/reference/ipeds/, cip_hard_coded_transitions.csv)."""
from __future__ import annotations

import glob
import tomllib
from decimal import Decimal
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from pseo_das.ipeds_demo import (ACCENTED_NAME, COMPLETIONS_HEADER, DIRECTORY_HEADER, HARD_CODED_FILE,
                                 HARD_CODED_HEADER, LATIN1_YEAR, LEFT_OUT_SERIES, SEED, YEARS,
                                 expected_awards, write_demo_ipeds)
from pseo_das.schemas.institutions import institution_labels
from pseo_das.synth import CIP_SWITCH_YEAR, INST_STATE_CODES, make_universe, write_synthetic
from pseo_das.tasks.inputs.cip_crosswalk import read_crosswalk
from pseo_das.tasks.inputs.ipeds import read_completions, read_directory

ROOT = Path(__file__).resolve().parents[1]
REFERENCE = ROOT / "pseo_das" / "reference"
IPEDS = REFERENCE / "ipeds"
STATE_ABBR = {"08": "CO", "26": "MI", "48": "TX", "51": "VA", "55": "WI"}


def _completions(year: int) -> Path:
    return IPEDS / f"C{year}_A.csv"


def _directory(year: int) -> Path:
    return IPEDS / f"HD{year}.csv"


def _raw(path: Path, encoding: str = "utf-8") -> pd.DataFrame:
    return pd.read_csv(path, dtype=str, keep_default_na=False, encoding=encoding)


@pytest.fixture(scope="module")
def universe():
    return make_universe(SEED)


@pytest.fixture(scope="module")
def directories() -> dict[int, pd.DataFrame]:
    return {year: read_directory(_directory(year)) for year in YEARS}


@pytest.fixture(scope="module")
def completions() -> dict[int, pd.DataFrame]:
    return {year: read_completions(_completions(year)) for year in YEARS}


@pytest.fixture(scope="module")
def hard_coded() -> pd.DataFrame:
    return pd.read_csv(REFERENCE / HARD_CODED_FILE, dtype=str, keep_default_na=False)


# --- files, layouts, encodings -----------------------------------------------------

def test_the_packaged_files_are_there_small_and_shipped():
    names = sorted(p.name for p in IPEDS.iterdir() if p.suffix == ".csv")
    assert names == sorted([f"C{y}_A.csv" for y in YEARS] + [f"HD{y}.csv" for y in YEARS])
    assert all((IPEDS / n).stat().st_size < 150_000 for n in names)
    assert sum((IPEDS / n).stat().st_size for n in names) < 3_000_000
    assert YEARS == tuple(range(2001, 2021))            # every year of the synthetic universe
    assert "SYNTHETIC" in (IPEDS / "README.md").read_text()
    globs = tomllib.loads((ROOT / "pyproject.toml").read_text()
                          )["tool"]["setuptools"]["package-data"]["pseo_das"]
    # setuptools expands package-data globs as glob does, "**" recursively
    shipped = {name for g in globs
               for name in glob.glob(g, root_dir=ROOT / "pseo_das", recursive=True)}
    for path in [*IPEDS.iterdir(), REFERENCE / HARD_CODED_FILE]:
        assert path.relative_to(ROOT / "pseo_das").as_posix() in shipped, path


def test_layouts_are_the_real_ipeds_columns():
    for year in YEARS:
        assert tuple(_raw(_completions(year)).columns) == COMPLETIONS_HEADER
        encoding = "latin-1" if year == LATIN1_YEAR else "utf-8"
        assert tuple(_raw(_directory(year), encoding).columns) == DIRECTORY_HEADER
    assert COMPLETIONS_HEADER[:4] == ("UNITID", "CIPCODE", "MAJORNUM", "AWLEVEL")


def test_one_directory_is_latin1_the_others_utf8():
    latin1 = _directory(LATIN1_YEAR).read_bytes()
    with pytest.raises(UnicodeDecodeError):
        latin1.decode("utf-8")
    assert ACCENTED_NAME in latin1.decode("latin-1")
    for year in set(YEARS) - {LATIN1_YEAR}:
        assert ACCENTED_NAME in _directory(year).read_bytes().decode("utf-8")


def test_every_file_loads(completions, directories, universe):
    for year in YEARS:
        assert len(completions[year]) > 1_000
        assert (completions[year]["grad_year"] == year).all()
        assert len(directories[year]) == len(universe.opeid)


# --- institutions ------------------------------------------------------------------

def test_directory_is_the_synthetic_universe(directories, universe):
    state = dict(zip(universe.opeid, INST_STATE_CODES[universe.inst_state]))
    for year, hd in directories.items():
        assert hd["unitid"].is_unique and hd["institution"].is_unique
        assert hd["unitid"].str.fullmatch(r"\d{6}").all()
        assert set(hd["institution"]) == set(universe.opeid)
        assert (hd["state"] == hd["institution"].map(state).map(STATE_ABBR)).all()
        assert hd.equals(directories[YEARS[0]])            # the same institutions every year


def test_directory_names_are_the_real_institutions_of_the_opeids():
    labels = institution_labels().set_index("institution")
    raw = _raw(_directory(YEARS[-1]))
    accented = raw["INSTNM"] == ACCENTED_NAME
    assert accented.sum() == 1
    real = raw[~accented]
    assert (real["INSTNM"] == real["OPEID"].map(labels["label"])).all()
    assert (raw["CITY"] == raw["OPEID"].map(labels["city"])).all()
    assert (raw["STABBR"] == raw["OPEID"].map(labels["institution_state"])).all()


def test_completions_unitids_are_in_the_directory_of_their_year(completions, directories):
    for year in YEARS:
        raw = _raw(_completions(year))
        assert set(raw["UNITID"]) <= set(directories[year]["unitid"])
        assert set(completions[year]["unitid"]) <= set(directories[year]["unitid"])


# --- awards ------------------------------------------------------------------------

def test_first_majors_are_the_expected_synthetic_graduates(completions, directories):
    six_digit = read_crosswalk().six_digit
    for year in YEARS:
        ids = dict(zip(directories[year]["institution"], directories[year]["unitid"]))
        expected = pd.DataFrame(expected_awards(year),
                                columns=["institution", "degree_level", "cipcode", "awards"])
        expected = expected[~expected["cipcode"].str.startswith(LEFT_OUT_SERIES)]
        if year >= CIP_SWITCH_YEAR:                      # written in CIP-2020 codes
            expected["cipcode"] = expected["cipcode"].map(six_digit)
        expected = expected.assign(unitid=expected["institution"].map(ids), grad_year=year)
        columns = ["unitid", "cipcode", "degree_level", "grad_year", "awards"]
        # from 2020-21 a certificate under one year is two rows (AWLEVEL 20 and 21)
        got = completions[year].groupby(columns[:4], as_index=False)["awards"].sum()
        got = got[columns].sort_values(columns[:3]).reset_index(drop=True)
        want = expected[columns].sort_values(columns[:3]).reset_index(drop=True)
        pd.testing.assert_frame_equal(got, want, check_dtype=False)


def test_years_from_the_switch_are_cip_2020_with_the_new_award_levels():
    crosswalk = read_crosswalk()
    for year in YEARS:
        raw = _raw(_completions(year))
        codes = set(raw.loc[raw["CIPCODE"] != "99", "CIPCODE"])
        new_levels = set(raw["AWLEVEL"]) & {"20", "21"}
        if year >= CIP_SWITCH_YEAR:
            assert codes <= crosswalk.codes_2020 and new_levels == {"20", "21"}
            assert "1" not in set(raw["AWLEVEL"])
        else:
            assert codes <= set(crosswalk.six_digit) and not new_levels
    assert crosswalk.six_digit["51.0808"] == "01.8301"                # moved across families
    assert "01.8301" in set(_raw(_completions(CIP_SWITCH_YEAR))["CIPCODE"])
    assert "51.0808" in set(_raw(_completions(CIP_SWITCH_YEAR - 1))["CIPCODE"])


def test_awards_by_institution_follow_the_synthetic_graduates(tmp_path, completions,
                                                              directories):
    # 20,000 synthetic graduates: about 1,100 in 2015 against about 11,400 awards (200,000
    # graduates). Sampling noise (Poisson, sd ~ sqrt(count)) and the rounding of small
    # programs move small institutions' shares, but the Zipf-like sizes (a 40-fold range)
    # dominate: the correlation is 0.99 with the default seed.
    write_synthetic(tmp_path, graduates=20_000, progress=lambda _: None)
    grads = pd.read_parquet(tmp_path / "graduates.parquet")
    grads = grads[(grads["grad_year"] == 2015)
                  & ~grads["cipcode"].astype(str).str.startswith(LEFT_OUT_SERIES)]
    synthetic = grads.groupby(grads["institution"].astype(str)).size()
    awards = completions[2015].merge(directories[2015], on="unitid") \
        .groupby("institution")["awards"].sum()
    both = pd.concat([synthetic.rename("grads"), awards.rename("awards")], axis=1).fillna(0)
    assert len(both) == 40
    assert np.corrcoef(both["grads"], both["awards"])[0, 1] > 0.95
    assert both["grads"].sum() == pytest.approx(both["awards"].sum() / 10, rel=0.10)


def test_totals_second_majors_and_sexes_are_consistent():
    for year in YEARS:
        raw = _raw(_completions(year))
        for col in ("CTOTALT", "CTOTALM", "CTOTALW"):
            raw[col] = raw[col].astype(int)
        assert (raw["CTOTALM"] + raw["CTOTALW"] == raw["CTOTALT"]).all()
        assert ((raw["XCTOTALM"] == "Z") == (raw["CTOTALM"] == 0)).all()
        assert set(raw["MAJORNUM"]) == {"1", "2"}
        assert set(raw["AWLEVEL"]) <= {"1", "2", "3", "4", "5", "6", "7", "8", "17", "18",
                                       "20", "21"}
        total = raw["CIPCODE"] == "99"
        keys = ["UNITID", "MAJORNUM", "AWLEVEL"]
        sums = raw[~total].groupby(keys)[["CTOTALT", "CTOTALM", "CTOTALW"]].sum()
        totals = raw[total].set_index(keys)[["CTOTALT", "CTOTALM", "CTOTALW"]]
        pd.testing.assert_frame_equal(totals.sort_index(), sums.sort_index())
        assert (raw.loc[~total, "CTOTALT"] > 0).all()
        assert raw.loc[~total, "CIPCODE"].str.fullmatch(r"\d{2}\.\d{4}").all()


def test_left_out_series_is_absent_but_in_the_synthetic_data(completions, hard_coded):
    for year in YEARS:
        assert not completions[year]["cipcode"].str.startswith(LEFT_OUT_SERIES).any()
        assert not _raw(_completions(year))["CIPCODE"].str.startswith(LEFT_OUT_SERIES).any()
        assert not completions[year]["cipcode"].str.startswith("43.04").any()  # nor in CIP-2020
    assert any(cip.startswith(LEFT_OUT_SERIES) for _, _, cip, _ in expected_awards(2015))
    assert LEFT_OUT_SERIES in set(hard_coded["cip2010"])
    several = read_crosswalk().transitions(4).groupby("cip2010").size()
    assert several[LEFT_OUT_SERIES] > 1


def test_regenerating_gives_the_same_bytes(tmp_path):
    written = write_demo_ipeds(tmp_path)
    assert len(written) == 2 * len(YEARS) + 1
    for path in written:
        packaged = REFERENCE / path.relative_to(tmp_path)
        assert path.read_bytes() == packaged.read_bytes(), path.name


# --- hard-coded transitions ----------------------------------------------------------

def test_hard_coded_shares_sum_to_one_exactly(hard_coded):
    assert tuple(hard_coded.columns) == HARD_CODED_HEADER
    assert not hard_coded.duplicated(["cip2010", "cip2020"]).any()
    for code, rows in hard_coded.groupby("cip2010"):
        shares = [Decimal(s) for s in rows["share"]]
        assert sum(shares) == 1, code
        assert all(0 < s < 1 for s in shares), code


def test_hard_coded_pairs_are_all_the_crosswalk_transitions(hard_coded):
    crosswalk = read_crosswalk()
    for digits, width in ((2, 2), (4, 5)):
        transitions = crosswalk.transitions(digits)
        listed = hard_coded[hard_coded["cip2010"].str.len() == width]
        assert len(listed) > 0
        for code, rows in listed.groupby("cip2010"):
            possible = set(transitions.loc[transitions["cip2010"] == code, "cip2020"])
            assert set(rows["cip2020"]) == possible, code
            assert rows["cip2020"].str.len().eq(width).all()
    assert {"60", "60.04", "60.05", "43.01"} == set(hard_coded["cip2010"])
    assert set(hard_coded["source"]) == {"residency programs are not IPEDS awards",
                                         "SYNTHETIC demo"}
    assert (hard_coded.loc[hard_coded["cip2010"] == "43.01", "source"] == "SYNTHETIC demo").all()
