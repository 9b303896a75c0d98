"""Public code lists used by the input and output schemas, and the one way a code is
matched against a pattern (`code_matches`).

Codes are ASCII: every pattern spells digits `[0-9]`, never `\\d` (which in Python matches
any Unicode digit: an OPEID in Arabic-Indic or full-width digits would pass `\\d{8}` and be
measured as another institution), and a code matches its pattern whole (`re.fullmatch`:
`$` alone also accepts a trailing newline). Nothing is stripped: a code with a space is
refused, naming its rows."""
from __future__ import annotations

import pandera.pandas as pa

# PSEO degree levels (IPEDS award levels as used in PSEO).
DEGREE_LEVELS = {
    "01": "Certificate < 1 year",
    "02": "Certificate 1-2 years",
    "03": "Associate's",
    "04": "Certificate 2-4 years",
    "05": "Bachelor's",
    "06": "Post-baccalaureate certificate",
    "07": "Master's",
    "08": "Post-master's certificate",
    "17": "Doctoral - research/scholarship",
    "18": "Doctoral - professional practice",
}

# NAICS 2017 sectors as coded in LEHD public-use files.
NAICS_SECTORS = (
    "11", "21", "22", "23", "31-33", "42", "44-45", "48-49", "51", "52", "53", "54",
    "55", "56", "61", "62", "71", "72", "81", "92",
)

OPEID_PATTERN = r"^[0-9]{8}$"
STATE_FIPS_PATTERN = r"^[0-9]{2}$"
CIP2010_PATTERN = r"^[0-9]{2}\.[0-9]{4}$"


def code_matches(pattern: str, name: str | None = None) -> pa.Check:
    """Each value (text) matches the ASCII `pattern` whole (re.fullmatch; null fails)."""
    return pa.Check(lambda values: values.str.fullmatch(pattern, na=False),
                    name=name or f"str_matches('{pattern}')")
YEARS_AFTER = (1, 5, 10)

# Status flags of the public files (LEHD public-use convention).
STATUS_OK, STATUS_NOT_AVAILABLE, STATUS_SUPPRESSED = 1, -1, 5

# The 50 states and DC (2-digit FIPS), and their Census divisions (code, name).
CENSUS_DIVISIONS = {
    "1": ("New England", ("09", "23", "25", "33", "44", "50")),
    "2": ("Middle Atlantic", ("34", "36", "42")),
    "3": ("East North Central", ("17", "18", "26", "39", "55")),
    "4": ("West North Central", ("19", "20", "27", "29", "31", "38", "46")),
    "5": ("South Atlantic", ("10", "11", "12", "13", "24", "37", "45", "51", "54")),
    "6": ("East South Central", ("01", "21", "28", "47")),
    "7": ("West South Central", ("05", "22", "40", "48")),
    "8": ("Mountain", ("04", "08", "16", "30", "32", "35", "49", "56")),
    "9": ("Pacific", ("02", "06", "15", "41", "53")),
}
STATE_FIPS = tuple(sorted(s for _, states in CENSUS_DIVISIONS.values() for s in states))
# Postal code of each of them (ANSI state codes; lehd_csv_naming writes them lower-case in
# file names, label_institution.csv upper-case in institution_state).
STATE_POSTAL = {
    "01": "AL", "02": "AK", "04": "AZ", "05": "AR", "06": "CA", "08": "CO", "09": "CT",
    "10": "DE", "11": "DC", "12": "FL", "13": "GA", "15": "HI", "16": "ID", "17": "IL",
    "18": "IN", "19": "IA", "20": "KS", "21": "KY", "22": "LA", "23": "ME", "24": "MD",
    "25": "MA", "26": "MI", "27": "MN", "28": "MS", "29": "MO", "30": "MT", "31": "NE",
    "32": "NV", "33": "NH", "34": "NJ", "35": "NM", "36": "NY", "37": "NC", "38": "ND",
    "39": "OH", "40": "OK", "41": "OR", "42": "PA", "44": "RI", "45": "SC", "46": "SD",
    "47": "TN", "48": "TX", "49": "UT", "50": "VT", "51": "VA", "53": "WA", "54": "WV",
    "55": "WI", "56": "WY",
}
DIVISION_OF_STATE = {s: d for d, (_, states) in CENSUS_DIVISIONS.items() for s in states}

# The non-employed / marginally attached destination of the flows (001 A.3).
NONEMPLOYED_INDUSTRY, NONEMPLOYED_STATE = "ZZ", "Z"
