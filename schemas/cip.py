"""Pandera schema of the NCES CIP-2010 to CIP-2020 crosswalk, checked on its text as
published (after removing the spreadsheet-formula wrapping ="..." of the NCES download).
Rows are identified by their position in the file (0 = first data row)."""
from __future__ import annotations

import pandas as pd
import pandera.pandas as pa

from pseo_das.schemas.codes import code_matches

CROSSWALK_COLUMNS = ("CIPCode2010", "CIPTitle2010", "Action", "TextChange", "CIPCode2020",
                     "CIPTitle2020")
UNCHANGED, MOVED, NEW, DELETED = "No substantive changes", "Moved to", "New", "Deleted"
ACTIONS = (UNCHANGED, MOVED, NEW, DELETED)
CIP_ANY_LEVEL = r"^[0-9]{2}(\.[0-9]{2}([0-9]{2})?)?$"   # 2-digit 11, 4-digit 11.07, 6-digit 11.0701

CROSSWALK_CHECK_COLUMNS = {
    "new_rows_have_no_2010_code": "Action, CIPCode2010",
    "other_rows_have_a_2010_code": "Action, CIPCode2010",
    "moved_codes_keep_their_level": "CIPCode2010, CIPCode2020",
    "unique_2010_code": "CIPCode2010",
}


def _empty_or(pattern: str) -> pa.Check:
    return pa.Check(lambda s: (s == "") | s.str.fullmatch(pattern[1:-1]), name=f"empty or {pattern}")


def crosswalk_schema() -> pa.DataFrameSchema:
    def new_rows(df: pd.DataFrame) -> pd.Series:
        return (df["Action"] != NEW) | (df["CIPCode2010"] == "")

    def other_rows(df: pd.DataFrame) -> pd.Series:
        return (df["Action"] == NEW) | (df["CIPCode2010"] != "")

    def same_level(df: pd.DataFrame) -> pd.Series:
        moved = df["Action"].isin([UNCHANGED, MOVED])
        return ~moved | (df["CIPCode2010"].str.len() == df["CIPCode2020"].str.len())

    def unique_2010(df: pd.DataFrame) -> pd.Series:
        codes = df["CIPCode2010"]
        return (codes == "") | ~codes.duplicated(keep=False)

    return pa.DataFrameSchema(
        {
            "CIPCode2010": pa.Column(str, _empty_or(CIP_ANY_LEVEL)),
            "CIPTitle2010": pa.Column(str),
            "Action": pa.Column(str, pa.Check.isin(list(ACTIONS))),
            "TextChange": pa.Column(str, pa.Check.isin(["yes", "no"])),
            "CIPCode2020": pa.Column(str, code_matches(CIP_ANY_LEVEL)),
            "CIPTitle2020": pa.Column(str),
        },
        checks=[pa.Check(new_rows, name="new_rows_have_no_2010_code"),
                pa.Check(other_rows, name="other_rows_have_a_2010_code"),
                pa.Check(same_level, name="moved_codes_keep_their_level"),
                pa.Check(unique_2010, name="unique_2010_code")],
        name="NCES CIP crosswalk")


HARD_CODED_CHECK_COLUMNS = {"shares_of_a_code_sum_to_1": "cip2010, share",
                            "a_crosswalk_transition": "cip2010, cip2020"}
CIP_2_OR_4 = r"^[0-9]{2}(\.[0-9]{2})?$"


def hard_coded_schema(transitions: set[tuple[str, str]]) -> pa.DataFrameSchema:
    """Hard-coded transitions: one row per (2- or 4-digit CIP-2010 code, CIP-2020 code of the
    same level the crosswalk allows), with a share in (0, 1]; a code's shares sum to 1."""
    def sums_to_one(df: pd.DataFrame) -> pd.Series:
        share = pd.to_numeric(df["share"], errors="coerce")
        return (share.groupby(df["cip2010"]).transform("sum") - 1).abs() < 1e-9

    def allowed(df: pd.DataFrame) -> pd.Series:
        return pd.Series([pair in transitions for pair in zip(df["cip2010"], df["cip2020"])],
                         index=df.index)

    def share_in_range(s: pd.Series) -> pd.Series:
        share = pd.to_numeric(s, errors="coerce")
        return (share > 0) & (share <= 1)

    return pa.DataFrameSchema(
        {
            "cip2010": pa.Column(str, code_matches(CIP_2_OR_4)),
            "cip2020": pa.Column(str, code_matches(CIP_2_OR_4)),
            "share": pa.Column(str, pa.Check(share_in_range, name="a number in (0, 1]")),
            "source": pa.Column(str, nullable=True),
        },
        checks=[pa.Check(sums_to_one, name="shares_of_a_code_sum_to_1"),
                pa.Check(allowed, name="a_crosswalk_transition")],
        unique=["cip2010", "cip2020"],
        name="hard-coded CIP transitions")
