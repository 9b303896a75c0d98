"""The keys and columns of cells and populations, shared by every stage that holds them
(the privacy store keys its measurements by them)."""
from __future__ import annotations

ALL_FIELDS_CIPCODE = "00"
NATIONAL_INSTITUTION = "00000000"
ALL_COHORTS = 0   # grad_cohort of a cell summed over every cohort (0000 in the public files)
CELL_KEYS = ["institution", "degree_level", "cipcode", "grad_cohort"]
POPULATION_KEYS = ["institution", "degree_level", "grad_cohort"]  # whom a measurement covers
CELL_COLUMNS = ["institution", "inst_state", "degree_level", "cipcode", "grad_cohort",
                "grad_cohort_years"]  # an institution-level cell, CIP-2020 codes
CIP_2010, CIP_2020 = "2010", "2020"
CIP_VINTAGES = (CIP_2010, CIP_2020)
# a measured cell as the frame and the store hold it: codes in the vintage of graduation
MEASURED_CELL_COLUMNS = CELL_COLUMNS + ["cip_vintage"]
MEASURED_CELL_KEYS = ["institution", "degree_level", "cip_vintage", "cipcode", "grad_cohort"]
