"""Public code lists used by the input and output schemas."""

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

OPEID_PATTERN = r"^\d{8}$"
STATE_FIPS_PATTERN = r"^\d{2}$"
CIP2010_PATTERN = r"^\d{2}\.\d{4}$"
YEARS_AFTER = (1, 5, 10)

# Status flags of the public files (LEHD public-use convention).
STATUS_OK, STATUS_NOT_AVAILABLE, STATUS_SUPPRESSED = 1, -1, 5
