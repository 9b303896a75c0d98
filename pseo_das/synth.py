"""Synthetic confidential PSEO inputs: graduates and their earnings outcomes.

`write_synthetic` writes ``graduates.parquet`` (one row per graduate) and
``outcomes.parquet`` (one row per graduate and observable years-after) describing a
made-up but realistic universe, and ``ipeds/``, the IPEDS completions of these graduates
(synth_ipeds.py: a release of the data set checks its frame against them):

* 40 institutions in 5 states (CO, MI, TX, VA, WI) of four kinds (the demo universe;
  `institutions=N` draws a national one instead: N institutions in every state and DC in
  proportion to population, with a flatter size law, see make_universe): community colleges,
  regional universities, research universities and health-science centres. Sizes are
  Zipf-like, and each institution offers only a subset of degree levels and programs,
  so an institution x degree x CIP x cohort table has many small cells and a few large
  ones. Each takes the OPEID of a real institution of its state, a main campus (OPEID
  ending in 00) of the LEHD schema's label_institution.csv whose name fits its kind
  (NAME_POOLS: "Community / Technical / Junior College" for community colleges,
  "University" for both kinds of universities, "Health / Medical / Medicine / Osteopathic"
  for health-science centres), picked with the universe's own draws (`_real_opeids`). Only
  the OPEID and name are real: sizes, programs and earnings are made up.
* 138 real CIP-2010 codes from 32 two-digit families and the PSEO degree levels.
* Two CIP vintages, as in the real data: graduates before `cip_switch_year` (default
  2020, when IPEDS moved to CIP-2020) carry the CIP-2010 code of their program, later
  graduates its CIP-2020 code from the packaged NCES crosswalk
  (`read_crosswalk().six_digit`). Eight programs change code: five move to another
  4-digit series of their family (01.0309 -> 01.1004, 15.0503 -> 15.1701, 43.0106 ->
  43.0406, 43.0116 -> 43.0403, 51.3817 -> 51.3203; 43.01 thus splits into 43.01 and
  43.04) and three to another family (51.0808 -> 01.8301, 51.1104 -> 01.1302, 51.2501
  -> 01.8101). Only the code written depends on the vintage: a graduate's draws,
  earnings and industry are those of the program, so the files for two switch years
  differ only in the cipcode of the graduates between them.
* Log-normal earnings built from field, degree, institution, state, industry,
  experience (1, 5, 10 years after graduation) and calendar-year (Great Recession)
  effects, a persistent person effect and a transitory shock. About 7% of person-years
  have no job (null earnings, state and industry) and a few percent are part-year or
  part-time jobs, many earning under $10,000. Bachelor's graduates five years out
  have mean log earnings of about 11.0 with a standard deviation of about 0.75, in 2016
  dollars; the files carry nominal dollars of the earnings year (times CPI-U(year) /
  CPI-U(2016), the packaged BLS annual averages), as the real data do.
* The state of the main job is mostly the institution's state; movers keep moving
  (a graduate out of state at 5 years is out of state at 10 years).
* Jobs in a state and year without earnings records (the packaged demo
  `reference/state_coverage.csv`) are not observed: those graduates look non-employed,
  as in the real data, which is what division suppression guards against.

The universe (institutions, states, sizes, program offerings and effects) depends only
on `seed`; `graduates` only sets how many graduates are drawn from it, so a small and a
large data set describe the same universe. Graduates are drawn and written in chunks of
250,000 with a random generator derived from (seed, chunk index), so memory stays
bounded and the same arguments give byte-identical files.

Size: with cohorts 2001-2020 and last_data_year 2022, every cohort has a 1-year
outcome, cohorts up to 2017 a 5-year one and up to 2012 a 10-year one; enrollment grows
over time, so there are about 2.35 outcome rows per graduate (measured with the
default seed: 200,000 graduates -> 465,901 outcome rows; 425,000 -> 989,833;
4,500,000 -> 10,478,701). Ten million outcome rows need about 4.3 million graduates;
4.5 million take 11-16 s and 470-490 MB peak RSS (including Prefect, which reading the
crosswalk imports).

Chunk k's draws depend only on (seed, k), so with one seed a smaller data set is
exactly the first graduates (and their outcomes) of a larger one.
"""
from __future__ import annotations

import functools
import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from pseo_das.schemas.institutions import INSTITUTIONS_FILE, institution_labels
from pseo_das.synth_employers import EmployerUniverse, employer_column

__all__ = ["write_synthetic", "make_universe", "cip_vintages", "CIP_SWITCH_YEAR"]

# Which states' earnings records exist in which years: the packaged demo coverage.
COVERAGE_FILE = Path(__file__).with_name("reference") / "state_coverage.csv"

FIRST_COHORT = 2001
LAST_COHORT = 2020
COHORTS = np.arange(FIRST_COHORT, LAST_COHORT + 1)
YEARS_AFTER = (1, 5, 10)
CHUNK_GRADUATES = 250_000
CIP_SWITCH_YEAR = 2020  # first cohort written in CIP-2020 codes (IPEDS: from 2020-21)
EARNINGS_DOLLAR_YEAR = 2016  # the model's earnings are in these dollars; files are nominal

UNIVERSE_STREAM = 0  # SeedSequence spawn keys: (0,) universe, (1, k) graduate chunk k
CHUNK_STREAM = 1

# ----------------------------------------------------------------------------------
# Code lists and model parameters
# ----------------------------------------------------------------------------------

DEGREE_LEVELS = ("01", "02", "03", "04", "05", "06", "07", "08", "17", "18")
# Log-earnings effect of the degree, relative to a bachelor's degree.
DEGREE_EFFECT = {"01": -0.45, "02": -0.35, "03": -0.25, "04": -0.20, "05": 0.0,
                 "06": 0.08, "07": 0.22, "08": 0.25, "17": 0.42, "18": 0.60}
# How steep the experience profile is, relative to a bachelor's degree.
EXPERIENCE_SLOPE = {"01": 0.5, "02": 0.5, "03": 0.6, "04": 0.6, "05": 1.0, "06": 0.8,
                    "07": 0.8, "08": 0.7, "17": 0.7, "18": 1.2}
EXPERIENCE_EFFECT = {1: -0.40, 5: 0.0, 10: 0.22}
# Chance that a graduate still works in the institution's state.
STAY_IN_STATE = {"01": 0.90, "02": 0.90, "03": 0.88, "04": 0.86, "05": 0.80, "06": 0.75,
                 "07": 0.72, "08": 0.72, "17": 0.55, "18": 0.62}
STAY_DECAY = {1: 0.0, 5: 0.04, 10: 0.07}
# Chance of no job in the year, by degree level, plus years-after adjustments.
NONEMPLOYMENT = {"01": 0.10, "02": 0.09, "03": 0.08, "04": 0.08, "05": 0.055, "06": 0.05,
                 "07": 0.045, "08": 0.045, "17": 0.04, "18": 0.035}
NONEMPLOYMENT_BY_YEARS_AFTER = {1: 0.015, 5: 0.0, 10: 0.01}
PART_YEAR = {1: 0.08, 5: 0.045, 10: 0.035}  # chance of a part-year / part-time job
PERSISTENCE = 0.6        # chance a person's employment status / industry carries over
PERSON_SD = 0.50         # sd of the persistent person effect on log earnings
TRANSITORY_SD = 0.35     # sd of the year-to-year shock
BASE_LOG_EARNINGS = 11.10  # bachelor's, 5 years out, average field/institution/industry


def recession_effect(calendar_year: np.ndarray) -> np.ndarray:
    """Log-earnings effect of the calendar year: slow real growth, a 2009-2011 dip."""
    dip = np.select([calendar_year == 2009, calendar_year == 2010, calendar_year == 2011],
                    [-0.06, -0.05, -0.03], 0.0)
    return 0.004 * (calendar_year - 2012) + dip


def recession_nonemployment(calendar_year: np.ndarray) -> np.ndarray:
    """Extra chance of no job in the Great Recession years."""
    return np.select([calendar_year == 2009, calendar_year == 2010, calendar_year == 2011],
                     [0.03, 0.03, 0.015], 0.0)


# Institution states: FIPS -> (number of institutions, log-earnings effect).
INSTITUTION_STATES = {"08": (6, 0.05), "26": (8, -0.03), "48": (12, 0.0),
                      "51": (8, 0.06), "55": (6, -0.04)}

# Where out-of-state graduates work: FIPS -> 2020 population (millions).
STATE_POPULATION = {
    "01": 5.0, "02": 0.7, "04": 7.2, "05": 3.0, "06": 39.5, "08": 5.8, "09": 3.6,
    "10": 1.0, "11": 0.7, "12": 21.5, "13": 10.7, "15": 1.5, "16": 1.8, "17": 12.8,
    "18": 6.8, "19": 3.2, "20": 2.9, "21": 4.5, "22": 4.7, "23": 1.4, "24": 6.2,
    "25": 7.0, "26": 10.1, "27": 5.7, "28": 3.0, "29": 6.2, "30": 1.1, "31": 2.0,
    "32": 3.1, "33": 1.4, "34": 9.3, "35": 2.1, "36": 20.2, "37": 10.4, "38": 0.8,
    "39": 11.8, "40": 4.0, "41": 4.2, "42": 13.0, "44": 1.1, "45": 5.1, "46": 0.9,
    "47": 6.9, "48": 29.1, "49": 3.3, "50": 0.6, "51": 8.6, "53": 7.7, "54": 1.8,
    "55": 5.9, "56": 0.6,
}

# Institution kinds: how many, size multiplier, log-earnings effect, which two-digit
# CIP families they teach (None = all), and per degree level the chance of offering
# an eligible program and the share of the institution's awards at that level.
INSTITUTION_KINDS = {
    "community": dict(count=15, size=1.0, effect=-0.02, families=None,
                      offer={"01": 0.45, "02": 0.45, "03": 0.55, "04": 0.3},
                      share={"01": 0.25, "02": 0.15, "03": 0.55, "04": 0.05}),
    "regional": dict(count=14, size=0.8, effect=-0.03, families=None,
                     offer={"01": 0.03, "02": 0.03, "03": 0.08, "05": 0.6, "06": 0.15,
                            "07": 0.35, "08": 0.05, "17": 0.03, "18": 0.1},
                     share={"01": 0.01, "02": 0.01, "03": 0.02, "05": 0.72, "06": 0.02,
                            "07": 0.2, "08": 0.005, "17": 0.005, "18": 0.01}),
    "research": dict(count=8, size=1.4, effect=0.08, families=None,
                     offer={"05": 0.8, "06": 0.25, "07": 0.7, "08": 0.15, "17": 0.6,
                            "18": 0.6},
                     share={"05": 0.62, "06": 0.02, "07": 0.24, "08": 0.01, "17": 0.05,
                            "18": 0.06}),
    "health": dict(count=3, size=0.3, effect=0.06, families=("26", "51"),
                   offer={"05": 0.7, "06": 0.3, "07": 0.8, "08": 0.3, "17": 0.6, "18": 0.9},
                   share={"05": 0.25, "06": 0.05, "07": 0.35, "08": 0.03, "17": 0.07,
                          "18": 0.25}),
}
# Real institutions (label_institution.csv) the synthetic ones take, by name: each kind
# draws from a pool of names that fit it (research and regional universities share one).
NAME_POOLS = {"health": r"\b(?:Health|Medical|Medicine|Osteopathic)\b",
              "college": r"\b(?:Community|Technical|Junior) College\b",
              "university": r"\bUniversity\b"}
KIND_POOL = {"community": "college", "regional": "university", "research": "university",
             "health": "health"}
OPEID_DRAWS = 41_000   # draws of the pick (the range of the made-up OPEIDs before)
ZIPF_EXPONENT = 1.0
# The demo universe: 40 institutions in the 5 states of INSTITUTION_STATES (its largest
# institution has about 18% of the graduates). Any other number of institutions makes a
# national universe (`_make_national_institutions`): institutions in every state and DC in
# proportion to population, their kind from their name, and a flatter rank-size law, so
# that with hundreds of institutions or more the largest has a few percent.
DEMO_INSTITUTIONS = 40
NATIONAL_ZIPF_EXPONENT = 0.6
PROGRAM_SIZE_SD = 0.75  # sd of log program size around its popularity

# Real CIP-2010 codes: (code, degree levels at which it is awarded, popularity). Most keep
# their code in CIP-2020; eight move (crosswalk `Moved to`): within their 4-digit series
# (none here), to another 4-digit series of the family (01.0309 -> 01.1004, 15.0503 ->
# 15.1701, 43.0106 -> 43.0406, 43.0116 -> 43.0403, 51.3817 -> 51.3203) or to another
# family (51.0808 -> 01.8301, 51.1104 -> 01.1302, 51.2501 -> 01.8101). A graduate's
# program, earnings and industry are those of the CIP-2010 code, whatever the vintage
# written (see `cip_vintages`).
PROGRAMS = (
    ("01.0101", "01 02 03 05 07", 1.0), ("01.0309", "01 02 03 05", 0.15),
    ("01.0601", "01 02 03 05", 0.6),
    ("01.0901", "03 05 07 17", 0.8), ("01.1101", "05 07 17", 0.5),
    ("03.0101", "05 07", 0.5), ("03.0104", "03 05 07 17", 0.8),
    ("03.0506", "05 07 17", 0.3), ("03.0601", "05 07 17", 0.4),
    ("05.0102", "05 07 17", 0.2), ("05.0201", "05 07", 0.2), ("05.0207", "05 07 17", 0.2),
    ("09.0101", "03 05 07 17", 1.5), ("09.0401", "05 07", 0.8),
    ("09.0702", "02 03 05", 0.6), ("09.0902", "05 07", 0.6),
    ("11.0101", "02 03 05 07 17", 1.2), ("11.0103", "01 02 03 05 07", 1.0),
    ("11.0201", "01 02 03 05", 0.6), ("11.0701", "05 07 17", 2.0),
    ("11.0901", "01 02 03 05", 0.7), ("11.1003", "01 02 03 05 06 07", 0.6),
    ("12.0401", "01 02 03", 2.0), ("12.0500", "01 02", 0.6), ("12.0503", "01 02 03", 0.8),
    ("13.0101", "05 06 07 08 17", 1.0), ("13.0401", "06 07 08 17", 1.2),
    ("13.1001", "05 06 07", 0.8), ("13.1202", "05 07", 2.0), ("13.1205", "05 06 07", 0.8),
    ("13.1210", "01 02 03 05 07", 1.0),
    ("14.0101", "05 07 17", 0.5), ("14.0201", "05 07 17", 0.4),
    ("14.0701", "05 07 17", 0.5), ("14.0801", "05 07 17", 0.9),
    ("14.0901", "05 07 17", 0.5), ("14.1001", "05 07 17", 1.0),
    ("14.1901", "05 07 17", 1.3),
    ("15.0303", "02 03 05", 0.6), ("15.0503", "01 02 03", 0.25), ("15.0805", "02 03", 0.4),
    ("15.1301", "01 02 03", 0.5),
    ("16.0101", "05 07 17", 0.3), ("16.0901", "05 07 17", 0.2), ("16.0905", "05 07 17", 0.5),
    ("19.0701", "05 07 17", 0.6), ("19.0706", "01 02 03 05", 0.6),
    ("22.0101", "18", 1.0), ("22.0302", "01 02 03", 0.6),
    ("23.0101", "05 07 17", 1.5), ("23.1301", "05 07", 0.3), ("23.1302", "05 07", 0.3),
    ("24.0101", "03 05", 6.0), ("24.0102", "03 05", 3.0), ("24.0199", "01 03", 1.0),
    ("26.0101", "03 05 07 17", 3.0), ("26.0202", "05 07 17", 0.6),
    ("26.0406", "05 07 17", 0.5), ("26.1301", "05 07 17", 0.3), ("26.1501", "05 07 17", 0.4),
    ("27.0101", "05 07 17", 0.9), ("27.0301", "05 07 17", 0.3), ("27.0501", "05 07 17", 0.3),
    ("30.0101", "05", 0.4), ("30.1101", "04 05 06 07", 0.2), ("30.1901", "05 07 17", 0.4),
    ("30.2001", "05 07", 0.5),
    ("31.0101", "05 07", 0.4), ("31.0501", "03 05 07", 0.5), ("31.0505", "05 07 17", 1.5),
    ("38.0101", "05 07 17", 0.4), ("38.0201", "05 07 17", 0.2),
    ("40.0401", "05 07 17", 0.15), ("40.0501", "05 07 17", 0.7),
    ("40.0601", "05 07 17", 0.3), ("40.0801", "05 07 17", 0.4),
    ("42.0101", "03 05 07 17", 3.0), ("42.2801", "07 17", 0.3), ("42.2803", "07 17", 0.3),
    ("42.2804", "07 17", 0.2),
    ("43.0104", "02 03 05 07", 1.5), ("43.0106", "02 03 05 07", 0.5),
    ("43.0107", "01 02 03 05", 1.2), ("43.0116", "01 02 03 05 07", 0.25),
    ("43.0203", "01 02 03 05", 0.5),
    ("44.0401", "06 07", 0.8), ("44.0501", "07 17", 0.2), ("44.0701", "03 05 07 17", 1.2),
    ("45.0201", "05 07 17", 0.5), ("45.0601", "05 07 17", 1.0), ("45.0701", "05 07", 0.3),
    ("45.1001", "05 07 17", 1.2), ("45.1101", "03 05 07 17", 1.0),
    ("46.0201", "01 02", 0.4), ("46.0302", "01 02 03", 0.6), ("46.0503", "01 02", 0.3),
    ("47.0201", "01 02 03", 0.6), ("47.0604", "01 02 03", 0.9), ("47.0608", "01 02 03", 0.2),
    ("48.0501", "01 02 03", 0.4), ("48.0508", "01 02 03", 1.0),
    ("49.0205", "01", 0.5),
    ("50.0409", "02 03 05", 0.8), ("50.0501", "05 07", 0.5), ("50.0602", "02 03 05", 0.3),
    ("50.0701", "03 05 07", 1.0), ("50.0901", "05 07 17", 0.6),
    ("51.0401", "18", 0.3), ("51.0602", "03 05", 0.6), ("51.0707", "01 02 03 05", 0.6),
    ("51.0801", "01 02 03", 1.8), ("51.0808", "01 02 03 05", 0.5),
    ("51.0904", "01 02 03", 1.2), ("51.0911", "02 03 05", 0.6),
    ("51.0912", "07", 0.4), ("51.1005", "02 03 05", 0.3), ("51.1104", "02 05", 0.15),
    ("51.1201", "18", 0.6),
    ("51.2001", "18", 0.4), ("51.2201", "05 06 07 17", 0.6), ("51.2306", "07 18", 0.3),
    ("51.2308", "18", 0.4), ("51.2501", "07 17", 0.15),
    ("51.3801", "03 05 06 07 08", 5.0), ("51.3817", "06 07 08 17", 0.2), ("51.3818", "18", 0.3),
    ("51.3901", "01 02", 1.5), ("51.3902", "01", 1.2),
    ("52.0101", "02 03 05", 2.0), ("52.0201", "01 02 03 05 06 07", 6.0),
    ("52.0204", "01 02 03", 0.5), ("52.0301", "02 03 05 06 07", 2.5),
    ("52.0302", "01 02 03", 0.8), ("52.0801", "05 07", 1.5), ("52.1001", "05 06 07", 0.8),
    ("52.1201", "05 07", 0.8), ("52.1401", "05 07", 1.6),
    ("54.0101", "05 07 17", 1.2),
)

# Log-earnings effect of the two-digit CIP family, and of a few particular programs.
FAMILY_EFFECT = {
    "01": -0.05, "03": -0.05, "05": -0.15, "09": -0.08, "11": 0.30, "12": -0.35,
    "13": -0.12, "14": 0.38, "15": 0.08, "16": -0.15, "19": -0.28, "22": 0.05,
    "23": -0.20, "24": -0.15, "26": 0.0, "27": 0.20, "30": 0.0, "31": -0.12,
    "38": -0.20, "40": 0.10, "42": -0.15, "43": 0.0, "44": -0.15, "45": 0.03,
    "46": 0.05, "47": 0.0, "48": 0.05, "49": 0.0, "50": -0.30, "51": 0.12,
    "52": 0.12, "54": -0.15,
}
PROGRAM_EFFECT = {"45.0601": 0.22, "51.3801": 0.12, "51.0801": -0.35, "51.3902": -0.40,
                  "51.1201": 0.35, "51.2001": 0.25, "22.0101": 0.25, "52.0801": 0.1,
                  "51.0808": -0.40, "51.1104": -0.15, "51.2501": 0.20, "51.3817": 0.05}
PROGRAM_EFFECT_SD = 0.05  # seed-specific jitter of each program's effect

NAICS_SECTORS = ("11", "21", "22", "23", "31-33", "42", "44-45", "48-49", "51", "52",
                 "53", "54", "55", "56", "61", "62", "71", "72", "81", "92")
INDUSTRY_EFFECT = {"11": -0.15, "21": 0.25, "22": 0.25, "23": 0.05, "31-33": 0.10,
                   "42": 0.05, "44-45": -0.25, "48-49": 0.0, "51": 0.15, "52": 0.15,
                   "53": -0.05, "54": 0.15, "55": 0.20, "56": -0.20, "61": -0.10,
                   "62": 0.0, "71": -0.25, "72": -0.40, "81": -0.20, "92": 0.0}
PART_YEAR_INDUSTRIES = {"44-45": 2.0, "71": 2.0, "72": 2.5, "56": 1.5}
# Employment shares of the whole economy: every graduate's industry is partly this.
ECONOMY_INDUSTRIES = {"11": 1, "21": 0.5, "22": 0.5, "23": 5, "31-33": 8, "42": 4,
                      "44-45": 11, "48-49": 4, "51": 2, "52": 4, "53": 1.5, "54": 6,
                      "55": 1.5, "56": 6, "61": 9, "62": 15, "71": 2, "72": 9, "81": 3,
                      "92": 5}
ECONOMY_WEIGHT = 0.4
FIELD_INDUSTRIES = {
    "agriculture": {"11": 5, "31-33": 3, "42": 2, "92": 2, "54": 1},
    "engineering": {"31-33": 5, "54": 5, "23": 1, "22": 1, "21": 1, "51": 1, "92": 1},
    "computing": {"51": 4, "54": 5, "52": 2, "31-33": 1, "55": 1},
    "business": {"52": 4, "54": 2, "55": 2, "42": 2, "44-45": 2, "53": 1, "31-33": 1},
    "health": {"62": 10, "44-45": 0.7, "92": 0.5},
    "education": {"61": 10, "62": 1, "81": 0.5},
    "social": {"62": 2, "92": 3, "81": 2, "61": 2, "54": 1},
    "humanities": {"61": 2, "51": 2, "71": 2, "54": 1, "44-45": 1, "81": 1},
    "science": {"54": 3, "62": 2, "61": 2, "31-33": 2, "92": 1},
    "trades": {"23": 5, "31-33": 3, "81": 3, "48-49": 2, "22": 1},
    "personal": {"81": 6, "72": 4},
    "protective": {"92": 6, "56": 2},
    "law": {"54": 6, "92": 3},
    "transport": {"48-49": 8},
    "general": ECONOMY_INDUSTRIES,
}
FAMILY_INDUSTRIES = {
    "01": "agriculture", "03": "agriculture", "05": "humanities", "09": "humanities",
    "11": "computing", "12": "personal", "13": "education", "14": "engineering",
    "15": "engineering", "16": "humanities", "19": "social", "22": "law",
    "23": "humanities", "24": "general", "26": "science", "27": "computing",
    "30": "science", "31": "social", "38": "humanities", "40": "science",
    "42": "social", "43": "protective", "44": "social", "45": "social", "46": "trades",
    "47": "trades", "48": "trades", "49": "transport", "50": "humanities",
    "51": "health", "52": "business", "54": "humanities",
}

# ----------------------------------------------------------------------------------
# The universe: institutions, programs and their effects (a function of the seed only)
# ----------------------------------------------------------------------------------

CIP_CODES = np.array([code for code, _, _ in PROGRAMS])
CIP_FAMILIES = np.array([code[:2] for code in CIP_CODES])
INST_STATE_CODES = np.array(sorted(INSTITUTION_STATES))     # the demo universe's
EMP_STATE_CODES = np.array(sorted(STATE_POPULATION))
DEGREE_CODES = np.array(DEGREE_LEVELS)
INDUSTRY_CODES = np.array(NAICS_SECTORS)
YEARS_AFTER_ARRAY = np.array(YEARS_AFTER, dtype=np.int8)
INDUSTRY_EFFECT_ARRAY = np.array([INDUSTRY_EFFECT[s] for s in NAICS_SECTORS])


@dataclass(frozen=True)
class Universe:
    """Everything that stays fixed for a seed, whatever the number of graduates.

    Institution arrays are indexed by institution; cell arrays by cell, a program
    (institution x degree level x CIP code) in one graduation year; the cell
    probabilities say how graduates spread over cells.
    """
    opeid: np.ndarray              # str, per institution
    inst_kind: np.ndarray          # str, key of INSTITUTION_KINDS, per institution
    state_codes: np.ndarray        # FIPS of the institution states, sorted
    inst_state: np.ndarray         # index into state_codes, per institution
    inst_effect: np.ndarray        # log-earnings effect, per institution
    cip_effect: np.ndarray         # log-earnings effect, per CIP code
    cip_industry_cdf: np.ndarray   # (CIP code, sector) cumulative industry mix
    cell_institution: np.ndarray
    cell_degree: np.ndarray        # index into DEGREE_CODES
    cell_cip: np.ndarray           # index into CIP_CODES
    cell_year: np.ndarray          # graduation year
    cell_cdf: np.ndarray           # cumulative probability of the cells


def make_universe(seed: int, institutions: int = DEMO_INSTITUTIONS) -> Universe:
    """Draw the institutions and programs of the synthetic universe for `seed`: the demo
    universe, or a national one of `institutions` institutions (DEMO_INSTITUTIONS)."""
    rng = _generator(seed, UNIVERSE_STREAM)
    if institutions == DEMO_INSTITUTIONS:
        state_codes = INST_STATE_CODES
        kinds, opeid, inst_state, inst_size, inst_effect = _make_institutions(rng)
    else:
        state_codes = EMP_STATE_CODES
        kinds, opeid, inst_state, inst_size, inst_effect = _make_national_institutions(
            rng, institutions)
    program_weight = _program_weights(rng, kinds, inst_size)
    cells = _make_cells(rng, program_weight)
    return Universe(opeid=opeid, inst_kind=kinds, state_codes=state_codes, inst_state=inst_state,
                    inst_effect=inst_effect, cip_effect=_cip_effects(rng),
                    cip_industry_cdf=_cip_industry_cdf(), **cells)


def _generator(seed: int, *stream: int) -> np.random.Generator:
    """An independent PCG64 stream for (seed, *stream), e.g. (seed, CHUNK_STREAM, k)."""
    return np.random.Generator(np.random.PCG64(np.random.SeedSequence(seed, spawn_key=stream)))


def _make_institutions(rng: np.random.Generator):
    """Kind, OPEID, state, Zipf-like size and earnings effect of each institution."""
    kinds = np.repeat(list(INSTITUTION_KINDS),
                      [k["count"] for k in INSTITUTION_KINDS.values()])
    n = len(kinds)
    states = np.repeat(np.arange(len(INST_STATE_CODES)),
                       [INSTITUTION_STATES[s][0] for s in INST_STATE_CODES])
    assert len(states) == n, "INSTITUTION_STATES counts must match INSTITUTION_KINDS"
    inst_state = rng.permutation(states)
    # One uniform draw per institution picks its real institution. The call is the one that
    # drew made-up OPEIDs before real ones were used, so every later draw of the universe
    # (sizes, effects, programs, cells) is what it was.
    pick = rng.choice(OPEID_DRAWS, size=n, replace=False) / OPEID_DRAWS
    opeid = _real_opeids(kinds, INST_STATE_CODES[inst_state], pick)
    kind_size = np.array([INSTITUTION_KINDS[k]["size"] for k in kinds])
    zipf_rank = rng.permutation(n) + 1
    inst_size = kind_size * zipf_rank ** -ZIPF_EXPONENT
    kind_effect = np.array([INSTITUTION_KINDS[k]["effect"] for k in kinds])
    state_effect = np.array([INSTITUTION_STATES[s][1] for s in INST_STATE_CODES])[inst_state]
    inst_effect = kind_effect + state_effect + rng.normal(0.0, 0.08, n)
    return kinds, opeid, inst_state, inst_size, inst_effect


def _make_national_institutions(rng: np.random.Generator, n: int):
    """The institutions of a national universe of `n` (any n but DEMO_INSTITUTIONS): states
    in proportion to population (largest remainders); in each state, distinct real main
    campuses of label_institution.csv (stratified picks, as `_real_opeids`), whose names
    give their kind (NAME_POOLS: health, community; a university is a research one with the
    demo's odds, 8 in 22; any other name a community college or a regional university with
    even odds); sizes kind size x rank^-NATIONAL_ZIPF_EXPONENT."""
    states = np.array(sorted(STATE_POPULATION))
    population = np.array([STATE_POPULATION[s] for s in states])
    quota = n * population / population.sum()
    per_state = np.floor(quota).astype(np.int64)
    per_state[np.argsort(-(quota - per_state), kind="stable")[:n - per_state.sum()]] += 1
    inst_state = np.repeat(np.arange(len(states)), per_state)
    campuses = _main_campuses()
    pick = rng.random(n)
    opeid = np.empty(n, dtype=object)
    names = np.empty(n, dtype=object)
    for s, state in enumerate(states):
        members = np.flatnonzero(inst_state == s)
        found = campuses[campuses["statefips"] == state]
        if len(found) < len(members):
            raise ValueError(f"{INSTITUTIONS_FILE}: {len(found)} institution(s) of state {state}, "
                             f"{len(members)} needed (use fewer institutions)")
        if len(members):
            bounds = len(found) * np.arange(len(members) + 1) // len(members)
            chosen = found.iloc[bounds[:-1] + (pick[members] * np.diff(bounds)).astype(np.int64)]
            opeid[members] = chosen["institution"].to_numpy()
            names[members] = chosen["label"].to_numpy()
    names = pd.Series(names, dtype=str)
    research = rng.random(n) < 8 / 22
    kinds = np.where(rng.random(n) < 0.5, "community", "regional").astype(object)
    for pool, kind in (("university", None), ("college", "community"), ("health", "health")):
        matched = names.str.contains(NAME_POOLS[pool], regex=True).to_numpy()
        kinds[matched] = np.where(research[matched], "research", "regional") if kind is None else kind
    kinds = kinds.astype(str)
    kind_size = np.array([INSTITUTION_KINDS[k]["size"] for k in kinds])
    inst_size = kind_size * (rng.permutation(n) + 1.0) ** -NATIONAL_ZIPF_EXPONENT
    kind_effect = np.array([INSTITUTION_KINDS[k]["effect"] for k in kinds])
    state_effect = np.array([INSTITUTION_STATES.get(s, (0, 0.0))[1] for s in states])[inst_state]
    inst_effect = kind_effect + state_effect + rng.normal(0.0, 0.08, n)
    return kinds, opeid.astype(str), inst_state, inst_size, inst_effect


@functools.lru_cache(maxsize=1)
def _main_campuses() -> pd.DataFrame:
    """Main campuses (OPEID ending in 00) of label_institution.csv in the 50 states and DC,
    one per name within a state (the lowest OPEID), sorted by state and OPEID."""
    labels = institution_labels()
    main = labels[labels["institution"].str.endswith("00")
                  & labels["statefips"].isin(list(STATE_POPULATION))]
    return (main.sort_values("institution").drop_duplicates(["statefips", "label"])
            .sort_values(["statefips", "institution"], ignore_index=True))


@functools.lru_cache(maxsize=1)
def _candidate_institutions() -> dict[tuple[str, str], np.ndarray]:
    """Per (state FIPS, name pool), the OPEIDs of the real institutions a synthetic one may
    take: main campuses (OPEID ending in 00) of label_institution.csv, one per name within
    a state (the lowest OPEID), sorted; a name goes to the first pool of NAME_POOLS it
    matches, others to none."""
    main = _main_campuses()
    main = main[main["statefips"].isin(list(INSTITUTION_STATES))]
    pool = pd.Series("", index=main.index)
    for name, pattern in reversed(NAME_POOLS.items()):   # the first matching pool wins
        pool[main["label"].str.contains(pattern, regex=True)] = name
    return {key: np.sort(group["institution"].to_numpy())
            for key, group in main[pool != ""].groupby([main["statefips"], pool[pool != ""]])}


def _real_opeids(kinds: np.ndarray, states: np.ndarray, pick: np.ndarray) -> np.ndarray:
    """The OPEID of a real institution of its state for each synthetic institution, from
    the pool of its kind (KIND_POOL). The m institutions of a (state, pool) take distinct
    candidates: the sorted candidates are cut into m consecutive strata, and the j-th
    institution takes the one at `pick` (a uniform in [0, 1)) within the j-th stratum."""
    candidates = _candidate_institutions()
    opeid = np.empty(len(kinds), dtype=object)
    pools = np.array([KIND_POOL[k] for k in kinds])
    for state, pool in sorted(set(zip(states, pools))):
        members = np.flatnonzero((states == state) & (pools == pool))
        found = candidates.get((str(state), str(pool)), np.array([]))
        if len(found) < len(members):
            raise ValueError(f"{INSTITUTIONS_FILE}: {len(found)} {pool} institution(s) of state "
                             f"{state}, {len(members)} needed")
        bounds = len(found) * np.arange(len(members) + 1) // len(members)
        width = np.diff(bounds)
        opeid[members] = found[bounds[:-1] + (pick[members] * width).astype(np.int64)]
    return opeid.astype(str)


def _program_weights(rng: np.random.Generator, kinds: np.ndarray,
                     inst_size: np.ndarray) -> np.ndarray:
    """Expected share of all graduates in each (institution, CIP, degree) program."""
    n_inst, n_cip, n_deg = len(kinds), len(CIP_CODES), len(DEGREE_CODES)
    awarded = np.array([[deg in levels.split() for deg in DEGREE_CODES]
                        for _, levels, _ in PROGRAMS])
    popularity = np.array([pop for _, _, pop in PROGRAMS])
    offer_prob = np.zeros((n_inst, n_cip, n_deg))
    level_share = np.zeros((n_inst, n_deg))
    for i, kind in enumerate(kinds):
        spec = INSTITUTION_KINDS[kind]
        taught = (np.ones(n_cip, bool) if spec["families"] is None
                  else np.isin(CIP_FAMILIES, spec["families"]))
        for d, deg in enumerate(DEGREE_CODES):
            offer_prob[i, :, d] = spec["offer"].get(deg, 0.0) * taught * awarded[:, d]
            level_share[i, d] = spec["share"].get(deg, 0.0)
    # Popular programs are offered more often.
    offer_prob = np.minimum(1.0, offer_prob * (0.6 + 0.4 * np.sqrt(popularity))[None, :, None])
    offered = rng.random(offer_prob.shape) < offer_prob
    _offer_at_least_one(offered, offer_prob, popularity)
    raw = offered * popularity[None, :, None] * rng.lognormal(0.0, PROGRAM_SIZE_SD, offered.shape)
    per_level = raw.sum(axis=1, keepdims=True)
    within_level = np.divide(raw, per_level, out=np.zeros_like(raw), where=per_level > 0)
    weight = within_level * level_share[:, None, :]
    weight /= weight.sum(axis=(1, 2), keepdims=True)
    return weight * inst_size[:, None, None]


def _offer_at_least_one(offered: np.ndarray, offer_prob: np.ndarray,
                        popularity: np.ndarray) -> None:
    """Give an institution that drew no program its most popular possible program."""
    for i in np.flatnonzero(~offered.any(axis=(1, 2))):
        score = (offer_prob[i] > 0) * popularity[:, None]
        offered[i][np.unravel_index(np.argmax(score), score.shape)] = True


def _make_cells(rng: np.random.Generator, program_weight: np.ndarray) -> dict:
    """Spread each program's weight over graduation years (growth, late starts)."""
    n_inst = program_weight.shape[0]
    inst, cip, deg = np.nonzero(program_weight)
    growth = rng.normal(0.015, 0.02, n_inst)[inst]
    late = rng.random(len(inst)) < 0.12
    start = np.where(late, rng.integers(FIRST_COHORT + 2, LAST_COHORT - 4, len(inst)),
                     FIRST_COHORT)
    years = COHORTS[None, :]
    weight = (program_weight[inst, cip, deg][:, None]
              * np.exp(growth[:, None] * (years - FIRST_COHORT))
              * (years >= start[:, None]))
    cdf = np.cumsum(weight.ravel())
    n_years = len(COHORTS)
    return dict(cell_institution=np.repeat(inst, n_years), cell_degree=np.repeat(deg, n_years),
                cell_cip=np.repeat(cip, n_years), cell_year=np.tile(COHORTS, len(inst)),
                cell_cdf=cdf / cdf[-1])


def _cip_effects(rng: np.random.Generator) -> np.ndarray:
    """Log-earnings effect of each CIP code: family, program, seed-specific jitter."""
    family = np.array([FAMILY_EFFECT[f] for f in CIP_FAMILIES])
    program = np.array([PROGRAM_EFFECT.get(code, 0.0) for code in CIP_CODES])
    return family + program + rng.normal(0.0, PROGRAM_EFFECT_SD, len(CIP_CODES))


def _cip_industry_cdf() -> np.ndarray:
    """Per CIP code, the cumulative distribution of its graduates over NAICS sectors."""
    def mix(weights: dict) -> np.ndarray:
        v = np.array([weights.get(s, 0.0) for s in NAICS_SECTORS], float)
        return v / v.sum()
    economy = mix(ECONOMY_INDUSTRIES)
    rows = [ECONOMY_WEIGHT * economy + (1 - ECONOMY_WEIGHT)
            * mix(FIELD_INDUSTRIES[FAMILY_INDUSTRIES[f]]) for f in CIP_FAMILIES]
    cdf = np.cumsum(rows, axis=1)
    return cdf / cdf[:, -1:]


@functools.lru_cache(maxsize=1)
def _price_levels() -> np.ndarray:
    """CPI-U(year) / CPI-U(EARNINGS_DOLLAR_YEAR) by calendar year (the packaged BLS annual
    averages), indexed by year."""
    from pseo_das.tasks.inputs.cpi import read_cpi  # imports Prefect: lazily
    annual = read_cpi().annual
    levels = np.full(max(annual) + 1, np.nan)
    for year, value in annual.items():
        levels[year] = float(value / annual[EARNINGS_DOLLAR_YEAR])
    return levels


def price_level(calendar_year: np.ndarray) -> np.ndarray:
    """Nominal dollars per EARNINGS_DOLLAR_YEAR dollar in each calendar year: the model's
    earnings are real (that year's dollars) and the files carry nominal earnings, as the
    real data do."""
    return _price_levels()[calendar_year]


@functools.lru_cache(maxsize=1)
def cip_vintages() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """CIP codes of both vintages: (labels, cip2010, cip2020) where `labels` are the
    sorted CIP-2010 and CIP-2020 codes of the programs and, per program (CIP_CODES order),
    `cip2010` / `cip2020` index its code of that vintage in `labels`. The CIP-2020 code is
    the packaged NCES crosswalk's (`read_crosswalk().six_digit`)."""
    from pseo_das.tasks.inputs.cip_crosswalk import read_crosswalk  # imports Prefect: lazily
    six_digit = read_crosswalk().six_digit
    new = [six_digit.get(code) for code in CIP_CODES]
    lost = [code for code, dest in zip(CIP_CODES, new) if dest is None]
    if lost:
        raise ValueError(f"PROGRAMS code(s) without a CIP-2020 code in the crosswalk: {lost}")
    labels = np.array(sorted(set(CIP_CODES) | set(new)))
    return labels, np.searchsorted(labels, CIP_CODES), np.searchsorted(labels, new)


# ----------------------------------------------------------------------------------
# Drawing graduates and outcomes, one chunk at a time
# ----------------------------------------------------------------------------------

@dataclass
class GraduateChunk:
    """Graduates of one chunk, as indices into the universe's code lists."""
    person_id: np.ndarray
    institution: np.ndarray
    degree: np.ndarray
    cip: np.ndarray
    grad_year: np.ndarray


def draw_graduates(universe: Universe, rng: np.random.Generator,
                   first_person_id: int, n: int) -> GraduateChunk:
    """Draw `n` graduates' cells; person ids run from `first_person_id`."""
    cell = np.searchsorted(universe.cell_cdf, rng.random(n), side="right")
    cell = np.minimum(cell, len(universe.cell_cdf) - 1)
    return GraduateChunk(person_id=np.arange(first_person_id, first_person_id + n,
                                             dtype=np.int64),
                         institution=universe.cell_institution[cell],
                         degree=universe.cell_degree[cell],
                         cip=universe.cell_cip[cell],
                         grad_year=universe.cell_year[cell])


@dataclass
class OutcomeChunk:
    """Outcome rows of one chunk; code columns are indices, -1 where there is no job."""
    person_id: np.ndarray
    years_after: np.ndarray
    earnings: np.ndarray     # NaN where there is no job
    emp_state: np.ndarray    # index into EMP_STATE_CODES
    industry: np.ndarray     # index into INDUSTRY_CODES


def state_coverage(path: Path = COVERAGE_FILE) -> tuple[np.ndarray, np.ndarray]:
    """First and last year of earnings records per state (EMP_STATE_CODES order) from a
    state coverage file; a state not in the file is never covered."""
    table = pd.read_csv(path, dtype={"state": str}).set_index("state").reindex(EMP_STATE_CODES)
    return (table["first_year"].fillna(np.inf).to_numpy(),
            table["last_year"].fillna(-np.inf).to_numpy())


def draw_outcomes(universe: Universe, grads: GraduateChunk, rng: np.random.Generator,
                  last_data_year: int, coverage: tuple[np.ndarray, np.ndarray]) -> OutcomeChunk:
    """Draw every observable (graduate, years-after) outcome of a chunk of graduates.
    A job in a state and year without earnings records (`coverage`) is not observed: the
    graduate looks non-employed, as in the real data."""
    home = np.searchsorted(EMP_STATE_CODES, universe.state_codes)[
        universe.inst_state[grads.institution]]
    person = _draw_person_traits(rng, home)
    who, k = _observable_rows(grads.grad_year, last_data_year)
    degree, cip, inst = grads.degree[who], grads.cip[who], grads.institution[who]
    calendar_year = grads.grad_year[who] + YEARS_AFTER_ARRAY[k]

    no_job = _persistent_uniform(rng, person["attachment"][who]) < (
        _by_degree(NONEMPLOYMENT)[degree] + _by_years_after(NONEMPLOYMENT_BY_YEARS_AFTER)[k]
        + recession_nonemployment(calendar_year))
    industry = _draw_industry(rng, universe.cip_industry_cdf[cip], person["industry"][who])
    stays = person["mobility"][who] < (_by_degree(STAY_IN_STATE)[degree]
                                       - _by_years_after(STAY_DECAY)[k])
    emp_state = np.where(stays, home[who], person["destination"][who])

    log_earnings = (BASE_LOG_EARNINGS
                    + _by_degree(DEGREE_EFFECT)[degree]
                    + universe.cip_effect[cip]
                    + universe.inst_effect[inst]
                    + _by_years_after(EXPERIENCE_EFFECT)[k] * _by_degree(EXPERIENCE_SLOPE)[degree]
                    + recession_effect(calendar_year)
                    + INDUSTRY_EFFECT_ARRAY[industry]
                    + person["earnings"][who]
                    + rng.normal(0.0, TRANSITORY_SD, len(who)))
    earnings = np.round(np.exp(log_earnings) * _part_year_factor(rng, k, industry)
                        * price_level(calendar_year))
    first, last = coverage
    no_job |= (calendar_year < first[emp_state]) | (calendar_year > last[emp_state])
    earnings[no_job] = np.nan
    emp_state[no_job] = -1
    industry[no_job] = -1
    return OutcomeChunk(person_id=grads.person_id[who], years_after=YEARS_AFTER_ARRAY[k],
                        earnings=earnings, emp_state=emp_state, industry=industry)


def _by_degree(table: dict[str, float]) -> np.ndarray:
    """A per-degree-level table as an array indexed like DEGREE_CODES."""
    return np.array([table[d] for d in DEGREE_LEVELS])


def _by_years_after(table: dict[int, float]) -> np.ndarray:
    """A per-years-after table as an array indexed like YEARS_AFTER."""
    return np.array([table[k] for k in YEARS_AFTER])


def _draw_person_traits(rng: np.random.Generator, home: np.ndarray) -> dict[str, np.ndarray]:
    """Traits a graduate keeps across years: earnings level, labour-force attachment,
    propensity to leave the state and where to, usual industry."""
    n = len(home)
    return dict(earnings=rng.normal(0.0, PERSON_SD, n), attachment=rng.random(n),
                mobility=rng.random(n), industry=rng.random(n),
                destination=_draw_destinations(rng, home))


def _observable_rows(grad_year: np.ndarray, last_data_year: int):
    """Row of the graduate and index into YEARS_AFTER of each observable outcome,
    ordered by graduate then years-after."""
    observable = np.stack([grad_year + k <= last_data_year for k in YEARS_AFTER], axis=1)
    return np.nonzero(observable)  # row-major: graduate, then years-after


def _persistent_uniform(rng: np.random.Generator, person_uniform: np.ndarray) -> np.ndarray:
    """Uniform draws that repeat the person's own draw with probability PERSISTENCE
    (so statuses persist across years) yet stay uniform overall."""
    fresh = rng.random(len(person_uniform))
    keep = rng.random(len(person_uniform)) < PERSISTENCE
    return np.where(keep, person_uniform, fresh)


def _draw_industry(rng: np.random.Generator, cdf: np.ndarray,
                   person_uniform: np.ndarray) -> np.ndarray:
    """Sector index from each row's cumulative industry mix."""
    u = _persistent_uniform(rng, person_uniform)
    return np.minimum((cdf < u[:, None]).sum(axis=1), cdf.shape[1] - 1)


def _draw_destinations(rng: np.random.Generator, home: np.ndarray) -> np.ndarray:
    """State each graduate works in if they leave: any other state, by population."""
    population = np.array([STATE_POPULATION[s] for s in EMP_STATE_CODES])
    u = rng.random(len(home))
    destination = np.empty(len(home), dtype=np.int64)
    for state in np.unique(home):  # a handful of institution states
        here = home == state
        elsewhere = np.where(np.arange(len(population)) == state, 0.0, population)
        cdf = np.cumsum(elsewhere) / elsewhere.sum()
        destination[here] = np.minimum(np.searchsorted(cdf, u[here], side="right"),
                                       len(cdf) - 1)
    return destination


def _part_year_factor(rng: np.random.Generator, k: np.ndarray,
                      industry: np.ndarray) -> np.ndarray:
    """1 for a full-year job; 0.05-0.5 for part-year or part-time work."""
    multiplier = np.ones(len(NAICS_SECTORS))
    for sector, m in PART_YEAR_INDUSTRIES.items():
        multiplier[NAICS_SECTORS.index(sector)] = m
    chance = _by_years_after(PART_YEAR)[k] * multiplier[industry]
    part = rng.random(len(industry)) < chance
    return np.where(part, rng.uniform(0.05, 0.5, len(industry)), 1.0)


# ----------------------------------------------------------------------------------
# Writing Parquet
# ----------------------------------------------------------------------------------

CODE = pa.dictionary(pa.int32(), pa.string())
# Written into graduates.parquet's own metadata, so that the mark travels with the file and
# cannot be attached to other data by accident; `pseo-das evaluate` refuses data without it.
SYNTHETIC_MARKER = b"pseo_das.synthetic"
GRADUATES_SCHEMA = pa.schema([("person_id", pa.int64()), ("institution", CODE),
                              ("inst_state", CODE), ("degree_level", CODE),
                              ("cipcode", CODE), ("grad_year", pa.int16())],
                             metadata={SYNTHETIC_MARKER: b"pseo-das synth: made-up people"})
OUTCOMES_SCHEMA = pa.schema([("person_id", pa.int64()), ("years_after", pa.int8()),
                             ("earnings", pa.float64()), ("emp_state", CODE),
                             ("industry", CODE)])


def code_array(index: np.ndarray, labels: np.ndarray) -> pa.DictionaryArray:
    """Dictionary-encoded strings labels[index], null where index is -1; the
    dictionary holds only the labels used, in label order."""
    missing = index < 0
    used = np.unique(index[~missing])
    compact = np.searchsorted(used, index).astype(np.int32)
    indices = pa.array(compact, mask=missing if missing.any() else None)
    return pa.DictionaryArray.from_arrays(indices, pa.array(labels[used], pa.string()))


def graduates_table(universe: Universe, grads: GraduateChunk,
                    cip_switch_year: int = CIP_SWITCH_YEAR) -> pa.Table:
    """A chunk of graduates as an Arrow table with GRADUATES_SCHEMA; graduates of
    `cip_switch_year` and later carry the CIP-2020 code of their program."""
    labels, cip2010, cip2020 = cip_vintages()
    cip = np.where(grads.grad_year >= cip_switch_year, cip2020[grads.cip], cip2010[grads.cip])
    columns = [pa.array(grads.person_id),
               code_array(grads.institution, universe.opeid),
               code_array(universe.inst_state[grads.institution], universe.state_codes),
               code_array(grads.degree, DEGREE_CODES),
               code_array(cip, labels),
               pa.array(grads.grad_year.astype(np.int16))]
    return pa.Table.from_arrays(columns, schema=GRADUATES_SCHEMA)


def outcomes_table(outcomes: OutcomeChunk) -> pa.Table:
    """A chunk of outcomes as an Arrow table with OUTCOMES_SCHEMA."""
    no_job = np.isnan(outcomes.earnings)
    columns = [pa.array(outcomes.person_id),
               pa.array(outcomes.years_after),
               pa.array(outcomes.earnings, mask=no_job),
               code_array(outcomes.emp_state, EMP_STATE_CODES),
               code_array(outcomes.industry, INDUSTRY_CODES)]
    return pa.Table.from_arrays(columns, schema=OUTCOMES_SCHEMA)


def is_synthetic(data_dir: Path) -> bool:
    """Whether `data_dir`'s graduates (graduates.parquet, or every part file of graduates/)
    were written by `write_synthetic` (they carry SYNTHETIC_MARKER in their Parquet
    metadata); False for any other file or format."""
    single, folder = Path(data_dir) / "graduates.parquet", Path(data_dir) / "graduates"
    paths = [single] if single.exists() else sorted(folder.glob("*.parquet"))
    try:
        return bool(paths) and all(SYNTHETIC_MARKER in (pq.read_schema(p).metadata or {})
                                   for p in paths)
    except (OSError, pa.ArrowInvalid):
        return False


def write_synthetic(out_dir: Path, graduates: int = 200_000, seed: int = 20240101,
                    last_data_year: int = 2022,
                    progress: Callable[[str], None] = print,
                    cip_switch_year: int = CIP_SWITCH_YEAR,
                    part_graduates: int | None = None,
                    institutions: int = DEMO_INSTITUTIONS,
                    employers: bool = False) -> dict[str, int]:
    """Write graduates.parquet and outcomes.parquet to out_dir, and ipeds/ with the IPEDS
    completions and directories of these graduates (synth_ipeds.py); return {"graduates": n,
    "outcomes": m}.

    The same arguments always give byte-identical files. Files are written under
    temporary names and renamed at the end, so a failed run leaves no partial
    graduates.parquet or outcomes.parquet behind. `progress` gets one line per chunk
    of 250,000 graduates. Graduates with grad_year < `cip_switch_year` carry their
    program's CIP-2010 code, the others its CIP-2020 code (the vintage changes nothing
    else: the same draws, earnings and industries).

    With `part_graduates`, the data are written as partitioned datasets instead: folders
    graduates/ and outcomes/ of part files part-00000.parquet, ... of about that many
    graduates each (whole chunks; the same rows, in the same order, as the single files).
    Memory stays bounded by the chunk at any size.

    `institutions` other than DEMO_INSTITUTIONS draws a national universe of that many
    institutions (make_universe) instead of the demo one, for data sets at national scale.

    `employers` adds the optional outcomes column employer_id (synth_employers: synthetic
    establishments per state x sector, a few dominant); every other byte of the data is
    the same as without it.
    """
    if graduates < 1:
        raise ValueError(f"graduates must be positive, got {graduates}")
    if part_graduates is not None and part_graduates < 1:
        raise ValueError(f"part_graduates must be positive, got {part_graduates}")
    out_dir = Path(out_dir)
    universe = make_universe(seed, institutions)   # refuses what it cannot draw, first
    out_dir.mkdir(parents=True, exist_ok=True)
    names = ("graduates", "outcomes")
    final = {n: out_dir / (n if part_graduates else f"{n}.parquet") for n in names}
    other = {n: out_dir / (f"{n}.parquet" if part_graduates else n) for n in names}
    in_the_way = [str(p) for p in other.values() if p.exists()]
    if in_the_way:
        raise ValueError(f"{', '.join(in_the_way)} already there: a data folder holds each input "
                         "once, as a file or as a folder of part files; remove it or write elsewhere")
    coverage = state_coverage()
    establishments = EmployerUniverse.make(seed) if employers else None
    outcomes_schema = OUTCOMES_SCHEMA.append(pa.field("employer_id", pa.string())) \
        if employers else OUTCOMES_SCHEMA
    cip_vintages()  # read the crosswalk before any file is opened
    partial = {n: out_dir / f".{n}.partial" for n in names}
    chunks_per_part = -(-part_graduates // CHUNK_GRADUATES) if part_graduates else None
    counts = {"graduates": 0, "outcomes": 0}
    writers: dict[str, pq.ParquetWriter] = {}
    try:
        for path in partial.values():
            _remove(path)
            if part_graduates:
                path.mkdir()
        for chunk, first in enumerate(range(0, graduates, CHUNK_GRADUATES)):
            if not writers or (chunks_per_part and chunk % chunks_per_part == 0):
                for writer in writers.values():
                    writer.close()
                part = f"part-{chunk // chunks_per_part:05d}.parquet" if chunks_per_part else None
                writers = {n: pq.ParquetWriter(partial[n] / part if part else partial[n], schema)
                           for n, schema in zip(names, (GRADUATES_SCHEMA, outcomes_schema))}
            rng = _generator(seed, CHUNK_STREAM, chunk)
            n = min(CHUNK_GRADUATES, graduates - first)
            grads = draw_graduates(universe, rng, first + 1, n)
            outcomes = draw_outcomes(universe, grads, rng, last_data_year, coverage)
            writers["graduates"].write_table(graduates_table(universe, grads, cip_switch_year))
            table = outcomes_table(outcomes)
            if establishments is not None:
                table = table.append_column("employer_id", employer_column(
                    establishments.draw(seed, chunk, outcomes.emp_state, outcomes.industry),
                    establishments.labels))
            writers["outcomes"].write_table(table)
            counts["graduates"] += n
            counts["outcomes"] += len(outcomes.person_id)
            progress(f"synth: {counts['graduates']:,} / {graduates:,} graduates, "
                     f"{counts['outcomes']:,} outcome rows")
        for writer in writers.values():
            writer.close()
        writers = {}
        for name in names:
            if final[name].is_dir():
                _remove(final[name])
            os.replace(partial[name], final[name])
    finally:
        for writer in writers.values():
            writer.close()
        for path in partial.values():
            _remove(path)
    from pseo_das.synth_ipeds import write_synthetic_ipeds   # imports this module
    write_synthetic_ipeds(out_dir)   # the IPEDS files of these graduates
    return counts


def _remove(path: Path) -> None:
    if path.is_dir():
        shutil.rmtree(path)
    else:
        path.unlink(missing_ok=True)
