"""IPEDS inputs and the transition shares of the CIP recast: the readers keep first majors
and drop totals, map award levels to PSEO degree levels, read a Latin-1 directory and name
bad rows; the shares fall back through the four levels of appendix B on a hand-built
case, give unseen transitions the small weight, and split unseen codes equally."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from pseo_das.tasks.cip_recast.transition_shares import transition_counts, transition_shares
from pseo_das.tasks.inputs.cip_crosswalk import read_crosswalk
from pseo_das.tasks.inputs.ingest import InputValidationError
from pseo_das.tasks.inputs.ipeds import read_completions, read_directory

CROSSWALK = read_crosswalk()


def test_completions_keep_first_majors_and_map_award_levels(tmp_path):
    path = tmp_path / "C2019_A.csv"
    path.write_text("UNITID,CIPCODE,MAJORNUM,AWLEVEL,CTOTALT,XCTOTALT\n"
                    "100654,01.0999,1,5,12,R\n"       # bachelor's
                    "100654,01.0999,2,5,3,R\n"        # second majors: not counted
                    "100654,99,1,5,40,R\n"            # the institution's total: dropped
                    "100654,1.0101,1,20,4,R\n"        # leading zero lost, short certificate
                    "100654,51.1201,1,19,2,R\n")      # doctor's other: no PSEO level
    rows = read_completions(path)
    assert rows.to_dict("records") == [
        {"unitid": "100654", "cipcode": "01.0999", "degree_level": "05", "grad_year": 2019,
         "awards": 12},
        {"unitid": "100654", "cipcode": "01.0101", "degree_level": "01", "grad_year": 2019,
         "awards": 4}]
    path.write_text("UNITID,CIPCODE,MAJORNUM,AWLEVEL,CTOTALT\n100654,01.0999,1,9,12\n")
    with pytest.raises(InputValidationError, match=r"C2019_A.csv: input rejected.*\n.*column "
                       r"AWLEVEL.*row 0: '9'"):
        read_completions(path)


def test_a_latin1_directory_is_read_and_said(tmp_path, capsys):
    path = tmp_path / "HD2019.csv"
    path.write_bytes("UNITID,OPEID,INSTNM,STABBR\n100654,00100200,Universit\xe9 A,AL\n"
                     "100663,-2,No OPEID,AL\n".encode("latin-1"))
    rows = read_directory(path)
    assert rows.to_dict("records") == [{"unitid": "100654", "institution": "00100200",
                                        "state": "AL"}]
    assert "not UTF-8; read as Latin-1" in capsys.readouterr().err


def completions(rows: list[tuple]) -> pd.DataFrame:
    return pd.DataFrame(rows, columns=["degree_level", "institution", "grad_cohort", "cipcode",
                                       "awards"])


def test_shares_fall_back_through_the_four_levels():
    # 01.03 (CIP-2010) -> 01.03 or 01.10 in CIP-2020 (01.0309 moved to 01.1004)
    ipeds = completions([
        ("05", "A", 2001, "01.0301", 3), ("05", "A", 2001, "01.0309", 1),   # level 1 for A/2001
        ("05", "A", 2007, "01.0309", 4),                                    # level 2 for A
        ("05", "C", 2001, "01.0301", 8),                                    # level 3: degree 05
        ("03", "C", 2001, "01.0309", 4)])                                   # level 4: all
    counts = transition_counts(ipeds, CROSSWALK.six_digit, 4)
    cells = pd.DataFrame([("05", "A", 2001, "01.03"), ("05", "A", 2004, "01.03"),
                          ("05", "B", 2001, "01.03"), ("07", "B", 2001, "01.03"),
                          ("05", "C", 2001, "01.03"), ("05", "A", 2001, "15.05"),
                          ("05", "A", 2001, "19.00")],
                         columns=["degree_level", "institution", "grad_cohort", "cip2010"])
    shares = transition_shares(cells, counts, CROSSWALK.transitions(4), unseen_weight=1e-6)

    def of(institution, degree, cohort, code):
        mine = shares[(shares["institution"] == institution) & (shares["degree_level"] == degree)
                      & (shares["grad_cohort"] == cohort) & (shares["cip2010"] == code)]
        return dict(zip(mine["cip2020"], mine["share"])), set(mine["level"])

    assert of("A", "05", 2001, "01.03") == ({"01.03": 0.75, "01.10": 0.25}, {1})
    assert of("A", "05", 2004, "01.03") == ({"01.03": 3 / 8, "01.10": 5 / 8}, {2})
    assert of("B", "05", 2001, "01.03") == ({"01.03": 11 / 16, "01.10": 5 / 16}, {3})
    assert of("B", "07", 2001, "01.03") == ({"01.03": 11 / 20, "01.10": 9 / 20}, {4})
    seen_once, level = of("C", "05", 2001, "01.03")                # 01.10 never seen there
    assert level == {1} and seen_once["01.10"] == pytest.approx(1e-6 / (8 + 1e-6))
    assert of("A", "05", 2001, "15.05") == ({"15.05": 0.5, "15.17": 0.5}, {5})  # never in IPEDS
    assert of("A", "05", 2001, "19.00")[0] == {}    # one destination: moved directly, no shares
    assert shares.groupby(["degree_level", "institution", "grad_cohort", "cip2010"])["share"] \
        .sum().round(12).eq(1).all()


def recast_inputs_at_a():
    """The 4-digit transitions, 15.05's hard-coded split and institution A's completions of
    2001 (01.0301 x 3, 01.0309 x 1) of the recast tests."""
    hard_coded = pd.DataFrame([("15.05", "15.05", 0.6), ("15.05", "15.17", 0.4)],
                              columns=["cip2010", "cip2020", "share"])
    counts = transition_counts(completions([("05", "A", 2001, "01.0301", 3),
                                            ("05", "A", 2001, "01.0309", 1)]), CROSSWALK.six_digit, 4)
    return CROSSWALK.transitions(4), hard_coded, counts


def test_a_recast_table_keeps_every_population_total_and_follows_the_routes():
    from pseo_das.tasks.cip_recast.recast import RecastError, recast_table
    rng = np.random.default_rng(11)
    cells = pd.DataFrame({
        "institution": ["A", "A", "A", "B"], "inst_state": ["26"] * 4,
        "degree_level": ["05"] * 4, "cipcode": ["01.03", "19.00", "15.05", "01.03"],
        "grad_cohort": [2001] * 4, "grad_cohort_years": [3] * 4})
    values = rng.integers(-5, 40, size=(4, 21))
    transitions, hard_coded, counts = recast_inputs_at_a()
    keyed = cells.rename(columns={"cipcode": "cip2010"})
    shares = transition_shares(keyed, counts, transitions)
    recast = recast_table(cells, values, transitions, hard_coded, shares, b"s" * 32,
                          "recast.cip4.y1", "earnings", "earnings.I.cip4.y1")
    out = recast.cells.assign(total=list(recast.values))
    for institution in ("A", "B"):                            # population totals, bin by bin
        mine = values[(cells["institution"] == institution).to_numpy()].sum(axis=0)
        theirs = recast.values[(recast.cells["institution"] == institution).to_numpy()].sum(axis=0)
        np.testing.assert_array_equal(mine, theirs)
    direct = out[(out["institution"] == "A") & (out["cipcode"] == "19.10")]
    np.testing.assert_array_equal(direct["total"].iloc[0], values[1])          # moved as is
    split = recast.values[((recast.cells["institution"] == "A")
                           & recast.cells["cipcode"].isin(["15.05", "15.17"])).to_numpy()]
    assert len(split) == 2
    np.testing.assert_array_equal(split.sum(axis=0), values[2])               # hard-coded
    assert set(recast.cells["cipcode"]) <= {"01.03", "01.10", "19.10", "15.05", "15.17"}
    assert dict(recast.how) == {"IPEDS shares": 2, "direct": 1, "hard-coded": 1}
    assert recast.entry.epsilon == 0 and recast.entry.derived_from == "earnings.I.cip4.y1"
    # the split's variance: |c| (1 - sum p^2) per value; 01.03 by 3/4 and 1/4 (A's IPEDS
    # awards, level 1 for A and level 3 for B), 15.05 by 0.6 / 0.4, 19.00 not split
    spread = np.array([1 - (0.75 ** 2 + 0.25 ** 2), 0, 1 - (0.6 ** 2 + 0.4 ** 2),
                       1 - (0.75 ** 2 + 0.25 ** 2)])
    assert recast.added_variance == pytest.approx((np.abs(values).sum(axis=1) * spread).sum())
    assert dict(recast.share_levels) == {1: 1, 3: 1}
    unknown = cells.assign(cipcode=["01.03", "19.00", "98.01", "01.03"])     # not in the crosswalk
    with pytest.raises(RecastError, match="98.01 have no CIP-2020 destination"):
        recast_table(unknown, values, transitions, hard_coded, shares, b"s" * 32,
                     "recast.cip4.y1", "earnings", "earnings.I.cip4.y1")


def test_a_table_recast_by_blocks_of_institutions_is_the_table_recast_at_once():
    """A national table is recast whole institutions at a time, the blocks continuing one
    stream: any block size gives the same cells, values, routes, variance and ledger entry."""
    from pseo_das.tasks.cip_recast.recast import RecastContext, institution_blocks, to_cip_2020
    rng = np.random.default_rng(12)
    n = 30
    cells = pd.DataFrame({
        "institution": [f"0000000{i // 5}" for i in range(n)], "inst_state": "26",
        "degree_level": "05", "cipcode": [("0103", "1900", "1505", "0103", "1505")[i % 5]
                                          for i in range(n)],
        "grad_cohort": 2001, "grad_cohort_years": 3,
        "cip_vintage": [("2010", "2010", "2010", "2020", "2020")[i % 5] for i in range(n)]})
    values = rng.integers(-5, 40, size=(n, 21))
    counts = transition_counts(completions([("05", "00000001", 2001, "01.0301", 3),
                                            ("05", "00000001", 2001, "01.0309", 1)]),
                               CROSSWALK.six_digit, 4)
    hard_coded = pd.DataFrame(columns=["cip2010", "cip2020", "share"])
    context = RecastContext(4, CROSSWALK.transitions(4), hard_coded, counts, 1e-6)

    def recast(block_cells, spill=False, source=values):
        return to_cip_2020(cells, source, context, b"s" * 32, "recast.cip4.y1", "earnings",
                           "earnings.I.cip4.y1", block_cells=block_cells, spill=spill)

    whole_cells, whole_values, whole = recast(n)
    assert len(institution_blocks(cells, n)) == 1 and len(institution_blocks(cells, 4)) == 6
    assert whole.added_variance > 0 and whole.entry.n_cells == 18
    for block_cells in (1, 4, 11):
        blocked_cells, blocked_values, blocked = recast(block_cells)
        pd.testing.assert_frame_equal(blocked_cells, whole_cells)
        np.testing.assert_array_equal(blocked_values, whole_values)
        assert blocked.entry == whole.entry and blocked.added_variance == whole.added_variance
        assert dict(blocked.how) == dict(whole.how)
        assert dict(blocked.share_levels) == dict(whole.share_levels)
        # the recast's summary holds no block's arrays (a view of none of their rows would
        # keep them all alive: 1.37 GB for a national flows table)
        assert blocked.values.base is None or blocked.values.base.size == 0
    from pseo_das.tasks.inputs.row_files import spilled
    # from a file, the values block by block into a file
    in_file_cells, in_file, _ = recast(4, spill=True, source=spilled(values))
    pd.testing.assert_frame_equal(in_file_cells, whole_cells)
    assert type(in_file).__name__ == "SpilledRows"
    np.testing.assert_array_equal(np.asarray(in_file), whole_values)
    np.testing.assert_array_equal(whole_values.sum(axis=0), values.sum(axis=0))


def test_kept_cells_are_added_to_the_recast_cells_of_their_code():
    """`recast_table` adds each part straight to its cell of the result, the block's
    CIP-2020 cells (`kept`) with them: the same as the recast cells and the kept cells
    summed afterwards, when several CIP-2010 cells and a kept cell share a CIP-2020 code."""
    from pseo_das.tasks.cip_recast.recast import _summed, recast_table
    rng = np.random.default_rng(13)
    cells = pd.DataFrame({
        "institution": ["A"] * 6 + ["B"] * 3, "inst_state": "26", "degree_level": "05",
        "cipcode": ["01.03", "01.10", "19.00", "15.05", "51.19", "51.21", "01.03", "01.10",
                    "15.05"],
        "grad_cohort": 2001, "grad_cohort_years": 3})
    values = rng.integers(-5, 40, size=(9, 21))
    transitions, hard_coded, counts = recast_inputs_at_a()
    shares = transition_shares(cells.rename(columns={"cipcode": "cip2010"}), counts, transitions)
    kept = cells.iloc[[0, 1, 4, 6]].assign(cipcode=["01.03", "51.12", "15.17", "01.10"])
    kept_values = rng.integers(-5, 40, size=(4, 21))

    def recast(kept_cells=None):
        return recast_table(cells, values, transitions, hard_coded, shares, b"s" * 32,
                            "recast.cip4.y1", "earnings", "earnings.I.cip4.y1",
                            kept=kept_cells)

    alone, together = recast(), recast((kept, kept_values))
    for institution in ("A", "B"):                 # population totals, bin by bin
        theirs = together.values[(together.cells["institution"] == institution).to_numpy()]
        np.testing.assert_array_equal(
            theirs.sum(axis=0), values[(cells["institution"] == institution).to_numpy()].sum(axis=0)
            + kept_values[(kept["institution"] == institution).to_numpy()].sum(axis=0))
    summed_cells, summed_values = _summed(pd.concat([alone.cells, kept], ignore_index=True),
                                          np.concatenate([alone.values, kept_values]))
    pd.testing.assert_frame_equal(together.cells, summed_cells)
    np.testing.assert_array_equal(together.values, summed_values)
    assert together.entry == alone.entry and together.added_variance == alone.added_variance


def _shares_by_merges(cells, counts, transitions, unseen_weight):
    """The shares as earlier versions computed them (merges and groupbys of frames)."""
    keys = ["degree_level", "institution", "grad_cohort", "cip2010"]
    choices = cells[keys].drop_duplicates().merge(transitions, on="cip2010")
    choices = choices[choices.groupby(keys)["cip2020"].transform("size") > 1] \
        .reset_index(drop=True).assign(level=5, weight=1.0)
    for level, group in ((4, []), (3, ["degree_level"]), (2, ["degree_level", "institution"]),
                         (1, ["degree_level", "institution", "grad_cohort"])):
        pairs = counts.groupby(group + ["cip2010", "cip2020"], as_index=False)["awards"].sum()
        codes = pairs.groupby(group + ["cip2010"], as_index=False)["awards"].sum() \
            .rename(columns={"awards": "code_total"})
        here = choices[group + ["cip2010", "cip2020"]].merge(pairs, how="left").merge(codes, how="left")
        supported = (here["code_total"].fillna(0) > 0).to_numpy()
        awards = here["awards"].fillna(0).to_numpy(dtype=float)[supported]
        choices.loc[supported, "level"] = level
        choices.loc[supported, "weight"] = np.where(awards > 0, awards, unseen_weight)
    total = choices.groupby(keys)["weight"].transform("sum")
    return choices.assign(share=choices["weight"] / total).drop(columns="weight")


@pytest.mark.parametrize("digits", [2, 4])
def test_the_shares_are_those_of_the_merges_to_the_last_bit(digits):
    """The shares looked up by integer keys are the merges' to the last bit, for cells in
    sorted order and not (pandas sums a cell's weights by two paths, which round
    differently: large award counts next to the unseen weight show it), since the
    split's draws depend on them."""
    rng = np.random.default_rng(digits)
    six = [old for old, new in CROSSWALK.six_digit.items() if new]
    ipeds = completions(list(zip(rng.choice(["03", "05"], 2000), rng.choice(list("ABCDEFGH"), 2000),
                                 rng.choice([2001, 2004], 2000), rng.choice(six, 2000),
                                 rng.choice([1, 7, 2872, 3 * 10 ** 7], 2000))))
    counts = transition_counts(ipeds, CROSSWALK.six_digit, digits)
    transitions = CROSSWALK.transitions(digits)
    codes = transitions["cip2010"].to_numpy()
    cells = pd.DataFrame({"degree_level": rng.choice(["03", "05", "07"], 300),
                          "institution": rng.choice(list("ABCDEFGHIJ"), 300),
                          "grad_cohort": rng.choice([2001, 2004, 2007], 300),
                          "cip2010": rng.choice(codes, 300)})
    for order in (cells, cells.sort_values(list(cells.columns))):
        pd.testing.assert_frame_equal(transition_shares(order, counts, transitions),
                                      _shares_by_merges(order, counts, transitions, 1e-6),
                                      check_exact=True)
