"""Division flows and division suppression (001 A.3.3) on a hand-built coverage case."""
import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from pseo_das.schemas.codes import NAICS_SECTORS, STATE_FIPS, STATUS_NOT_AVAILABLE, STATUS_SUPPRESSED
from pseo_das.tasks.employment_flows.division_flows import (PublishedFlowsChecks, flows_state_rows,
                                                            flows_table, institution_state_flows,
                                                            origin_tables, pseof_chunks, pseof_frame,
                                                            pseof_parts,
                                                            unobserved_division_share,
                                                            unobserved_states)
from pseo_das.tasks.codes.destinations import NONEMPLOYED, N_DESTINATIONS, N_STATES
from pseo_das.tasks.employment_flows.noisy_flows import NoisyFlows

MOUNTAIN, PACIFIC = "8", "9"     # geography codes of Census divisions 8 and 9
UNOBSERVED_EARLY = {"04", "06"}  # Arizona (Mountain) and California (Pacific): no data before 2005


def covered(years: np.ndarray) -> np.ndarray:
    late = np.isin(np.array(STATE_FIPS), sorted(UNOBSERVED_EARLY))
    return ~(late[None, :] & (np.asarray(years)[:, None] < 2005))


def flow(state: str, sector: str = "54") -> int:
    return NAICS_SECTORS.index(sector) * N_STATES + STATE_FIPS.index(state)


def table(flows_by_cell: list[dict[str, int]], cohorts: list[int], institutions: list[str]) -> NoisyFlows:
    corrected = np.zeros((len(flows_by_cell), N_DESTINATIONS), dtype=np.int64)
    for row, flows in enumerate(flows_by_cell):
        for state, count in flows.items():
            corrected[row, NONEMPLOYED if state == "Z" else flow(state)] = count
    cells = pd.DataFrame({"institution": institutions, "inst_state": "08", "degree_level": "05",
                          "cipcode": "00", "grad_cohort": cohorts, "grad_cohort_years": 1,
                          "noise_terms": 1})
    cells = cells.astype({c: "category" for c in ("institution", "inst_state", "degree_level",
                                                   "cipcode")})   # as read from the store
    return NoisyFlows("flows.I.cipA.y1", "A", 1, cells, corrected.copy(), ("x",),
                      corrected=corrected)


# Institution 1: an early cohort (observed 2002, AZ and CA missing) and a late one (2011, full
# coverage) from which the shares are learned: Mountain 30 of 100 to AZ, Pacific 5 of 50 to CA.
# Institution 2 has only the early cohort: nothing to learn from.
EARLY = {"08": 40, "49": 10, "41": 20, "Z": 7}
LATE = {"08": 50, "04": 30, "49": 20, "06": 5, "41": 45, "Z": 3}
FLOWS = table([EARLY, LATE, EARLY], [2001, 2010, 2001], ["00000001", "00000001", "00000002"])


def test_unobserved_states_follow_the_calendar_years_of_the_cell():
    missing = unobserved_states(FLOWS, covered)
    assert [set(np.array(STATE_FIPS)[m]) for m in missing] == [UNOBSERVED_EARLY, set(), UNOBSERVED_EARLY]


def test_shares_are_estimated_from_fully_covered_cells():
    missing = unobserved_states(FLOWS, covered)
    history = institution_state_flows([FLOWS], [missing])
    assert list(history.index) == ["00000001"]  # institution 2 has no fully covered cell
    share = unobserved_division_share(FLOWS, missing, history)
    mountain, pacific = int(MOUNTAIN) - 1, int(PACIFIC) - 1
    assert share[0, mountain] == 0.3 and share[0, pacific] == 0.1
    assert (share[1] == 0).all()                        # fully covered: nothing at risk
    assert share[2, mountain] == share[2, pacific] == 1.0  # unknown: treated as all unobserved
    others = np.delete(share, [mountain, pacific], axis=1)
    assert (others == 0).all()                          # divisions with no unobserved state


def official(share_max: float) -> pd.DataFrame:
    missing = unobserved_states(FLOWS, covered)
    share = unobserved_division_share(FLOWS, missing, institution_state_flows([FLOWS], [missing]))
    return flows_table(origin_tables(FLOWS, share > share_max))


def rows(pseof: pd.DataFrame, inst_level: str, institution: str, cohort: str) -> pd.DataFrame:
    mine = pseof[(pseof["inst_level"] == inst_level) & (pseof["institution"] == institution)
                 & (pseof["grad_cohort"] == cohort)]
    return mine.set_index(["geo_level", "geography", "ind_level", "industry"])


def test_division_flows_suppressed_exactly_where_the_share_exceeds_the_maximum():
    pseof = official(share_max=0.1)
    cells = pseof[(pseof["inst_level"] == "I") & (pseof["grad_cohort"] != "0000")]
    division = cells[(cells["geo_level"] == "D") & (cells["ind_level"] == "A")].set_index(
        ["institution", "grad_cohort", "geography"])
    suppressed = division[division["status_y1_grads_emp"] == STATUS_SUPPRESSED].index.tolist()
    assert suppressed == [("00000001", "2001", MOUNTAIN),  # 0.3 > 0.1; Pacific's 0.1 is not above
                          ("00000002", "2001", MOUNTAIN), ("00000002", "2001", PACIFIC)]
    assert division["y1_grads_emp"][suppressed].isna().all()
    # non-employment is the origin's: on its national all-industries row, never a division's
    assert (division["status_y1_grads_nme"] == STATUS_NOT_AVAILABLE).all()
    assert division["y1_grads_nme"].isna().all()
    by_sector = cells[(cells["geo_level"] == "D") & (cells["ind_level"] == "S")]
    hidden = by_sector[by_sector["status_y1_grads_emp"] == STATUS_SUPPRESSED]
    assert sorted(set(zip(hidden["institution"], hidden["geography"]))) == [
        ("00000001", MOUNTAIN), ("00000002", MOUNTAIN), ("00000002", PACIFIC)]
    assert len(hidden) == 3 * len(NAICS_SECTORS)            # every sector of those divisions
    assert (pseof.filter(like="status_y5_") == STATUS_NOT_AVAILABLE).all().all()
    assert (pseof.filter(like="status_y10_") == STATUS_NOT_AVAILABLE).all().all()


def test_a_sum_of_a_suppressed_division_flow_is_suppressed():
    pseof = official(share_max=0.1)
    state = rows(pseof, "S", "08", "2001")        # both institutions' early cohort
    assert state.loc[("D", MOUNTAIN, "A", "00"), "status_y1_grads_emp"] == STATUS_SUPPRESSED
    assert state.loc[("D", PACIFIC, "A", "00"), "status_y1_grads_emp"] == STATUS_SUPPRESSED
    first = rows(pseof, "I", "00000001", "0000")  # institution 1, early + late cohort
    assert first.loc[("D", MOUNTAIN, "A", "00"), "status_y1_grads_emp"] == STATUS_SUPPRESSED
    assert first.loc[("D", PACIFIC, "A", "00"), "y1_grads_emp"] == 20 + 50
    assert first.loc[("N", "00", "A", "00"), "y1_grads_emp"] == 70 + 150


def test_division_and_national_sums_equal_the_state_flows():
    pseof = official(share_max=1.0)
    late = rows(pseof, "I", "00000001", "2010")
    assert late.loc[("D", MOUNTAIN, "A", "00"), "y1_grads_emp"] == 100      # 08 + 04 + 49
    assert late.loc[("D", PACIFIC, "A", "00"), "y1_grads_emp"] == 50        # 06 + 41
    assert late.loc[("D", MOUNTAIN, "A", "00"), "y1_grads_emp_instate"] == 50
    assert late.loc[("D", PACIFIC, "A", "00"), "y1_grads_emp_instate"] == 0
    assert late.loc[("D", MOUNTAIN, "S", "54"), "y1_grads_emp"] == 100      # every job is in 54
    assert late.loc[("D", MOUNTAIN, "S", "54"), "y1_grads_emp_instate"] == 50
    assert late.loc[("D", MOUNTAIN, "S", "11"), "y1_grads_emp"] == 0
    assert late.loc[("N", "00", "A", "00"), "y1_grads_emp"] == 150
    assert late.loc[("N", "00", "S", "54"), "y1_grads_emp"] == 150
    assert late.loc[("N", "00", "S", "11"), "y1_grads_emp"] == 0
    assert late.loc[("N", "00", "A", "00"), "y1_grads_nme"] == 3
    assert late["y1_grads_nme"].drop(("N", "00", "A", "00")).isna().all()


def test_state_and_all_cohort_rows_sum_the_institution_cells():
    pseof = official(share_max=1.0)
    state = rows(pseof, "S", "08", "2001")        # institutions 1 and 2, early cohort
    assert state.loc[("D", MOUNTAIN, "A", "00"), "y1_grads_emp"] == 2 * (40 + 10)
    assert state.loc[("N", "00", "A", "00"), "y1_grads_emp_instate"] == 2 * 40
    assert state.loc[("N", "00", "A", "00"), "y1_grads_nme"] == 2 * 7
    every = rows(pseof, "S", "08", "0000")        # and the late cohort of institution 1
    assert every.loc[("N", "00", "A", "00"), "y1_grads_emp"] == 70 + 150 + 70
    assert every.loc[("N", "00", "A", "00"), "y1_grads_nme"] == 7 + 3 + 7
    assert every["y1_grads_nme"].notna().sum() == 1
    # CIP level A: (state, institution) x (all cohorts, by cohort) x the four destination levels
    assert set(pseof["agg_level_pseo"]) == {26, 32, 38, 44, 74, 80, 86, 92, 122, 128, 134, 140,
                                            170, 176, 182, 188}


def test_rows_follow_the_official_codes():
    pseof = official(share_max=1.0)
    assert set(pseof["geography"]) == {"00", *[str(d) for d in range(1, 10)]}
    assert set(pseof.loc[pseof["inst_level"] == "S", "institution"]) == {"08"}
    assert set(pseof["grad_cohort"]) == {"2001", "2010", "0000"}
    assert list(pseof["agg_level_pseo"]) == sorted(pseof["agg_level_pseo"])


def test_pseof_built_in_chunks_is_the_whole_file_row_for_row(monkeypatch):
    """A release writes pseof_all in chunks of whole origin cells, their destination levels
    summed a block of origin cells at a time: any chunk or block size gives the same rows
    as the whole table (a chunk boundary inside a level changes nothing)."""
    import pseo_das.tasks.employment_flows.division_flows as division_flows
    missing = unobserved_states(FLOWS, covered)
    share = unobserved_division_share(FLOWS, missing, institution_state_flows([FLOWS], [missing]))
    origins = origin_tables(FLOWS, share > 0.1)
    whole = flows_table(origins)
    parts = pseof_parts(origins)
    for rows_per_chunk in (1, 7, 200, 10 ** 6):
        chunks = [pseof_frame(rows) for _, _, rows in pseof_chunks(parts, rows_per_chunk)]
        if rows_per_chunk < 10 ** 6:
            assert len(chunks) > len(parts)      # some level is split between chunks
        pd.testing.assert_frame_equal(pd.concat(chunks, ignore_index=True), whole)
    for block_cells in (1, 2):
        monkeypatch.setattr(division_flows, "DESTINATION_BLOCK_CELLS", block_cells)
        pd.testing.assert_frame_equal(flows_table(origins), whole)


def published_checks(corrupt=None, names: bool = False) -> dict[str, str]:
    checks = PublishedFlowsChecks()
    checks.expect_divisions(FLOWS, *flows_state_rows(FLOWS))
    for part, start, chunk in pseof_chunks(pseof_parts(origin_tables(FLOWS, np.zeros((3, 9), bool))), 20):
        if corrupt is not None:
            chunk = pa.Table.from_pandas(corrupt(part, pseof_frame(chunk)), preserve_index=False)
        checks.add(part, start, chunk)
    return {(c["name"] if names else c["name"].split(" (")[0]): c["result"]
            for c in checks.results()}


def test_published_flows_checks_pass_on_the_flows_and_catch_a_wrong_value():
    assert all(r.startswith("passed") for r in published_checks().values())
    pseof = flows_table(origin_tables(FLOWS, np.zeros((3, 9), bool)))
    divisions = pseof[(pseof["inst_level"] == "I") & (pseof["grad_cohort"] != "0000")
                      & (pseof["geo_level"] == "D") & (pseof["ind_level"] == "A")]
    shown = sum(int((divisions[f"status_y{k}_grads_emp"] == 1).sum()) for k in (1, 5, 10))
    assert shown > 0 and ("every published division flow of the institution cells recomputed "
                          f"from flows_state.parquet ({shown:,})") in published_checks(names=True)

    def one_more_in_mountain(part, chunk):
        if part.origin.inst_level == "I" and part.origin.by_cohort and part.geo_level == "D" \
                and part.ind_level == "A":
            chunk = chunk.copy()
            chunk.loc[chunk["geography"] == MOUNTAIN, "y1_grads_emp"] += 1
        return chunk

    results = published_checks(one_more_in_mountain)
    assert results["every published division flow of the institution cells recomputed from "
                   "flows_state.parquet"].startswith("FAILED (3 differ)")   # 3 cells by cohort

    def negative_instate(part, chunk):
        chunk = chunk.copy()
        chunk["y1_grads_emp_instate"] = chunk["y1_grads_emp"] + 1
        chunk.loc[chunk.index[:1], "y1_grads_nme"] = -1
        return chunk

    results = published_checks(negative_instate)
    assert results["no published in-state count exceeds its employed count"].startswith("FAILED")
    assert results["no published flow is negative"].startswith("FAILED")


def test_flows_state_rows_by_blocks_equal_the_whole_table():
    """flows_state is built a block of origin cells at a time: the blocks' rows, in
    order, are the whole table's, and their division sums add up to the whole table's."""
    whole, rows, cols = flows_state_rows(FLOWS)
    for size in (1, 2):
        blocks = [flows_state_rows(FLOWS, start, start + size) for start in range(0, 3, size)]
        assert pa.concat_tables([b[0] for b in blocks]).to_pandas().equals(whole.to_pandas())
        assert np.array_equal(np.concatenate([b[1] for b in blocks]), rows)
        by_blocks, at_once = PublishedFlowsChecks(), PublishedFlowsChecks()
        for block in blocks:
            by_blocks.expect_divisions(FLOWS, *block)
        at_once.expect_divisions(FLOWS, whole, rows, cols)
        key = ("A", 1)
        assert np.array_equal(by_blocks.division_sums[key], at_once.division_sums[key])
        assert at_once.division_sums[key].sum() > 0


def test_flows_invariants_catch_each_broken_promise_in_any_block():
    from dataclasses import replace

    from pseo_das.tasks.employment_flows.division_flows import flows_invariants

    def failed(table, block_cells):
        return [c["result"] for c in flows_invariants([table], block_cells)
                if c["result"].startswith("FAILED")]

    assert failed(FLOWS, 1) == [] and failed(FLOWS, 2) == []
    negative = FLOWS.corrected.copy()
    negative[2, 0], negative[2, 1] = -1, negative[2, 1] + 1     # same total, one flow negative
    exceed = FLOWS.corrected.copy()
    exceed[1, flow("08")] += 1                                  # above its noisy count
    exceed[1, NONEMPLOYED] -= 1
    short = FLOWS.corrected.copy()
    short[2, NONEMPLOYED] -= 1                                  # total no longer matches
    for corrected, broken in ((negative, "negative flows"), (exceed, "flows exceed"),
                              (short, "cells differ")):
        for block_cells in (1, 2, 3):
            results = failed(replace(FLOWS, corrected=corrected), block_cells)
            assert any(broken in r for r in results), (broken, results)


def test_flows_state_parquet_reads_as_the_files_of_earlier_releases(tmp_path, monkeypatch):
    """internal/flows_state.parquet, written a block at a time from its dictionary-coded
    columns (blocks of two tables: other dictionaries; row groups cut across the blocks),
    reads back (read_flows_state) as the
    flows_state.parquet earlier releases wrote of the same rows (code columns written as
    text) and as their flows_state.csv: codes as text (the CIP code 11.07 is not 11.07 the
    number), counts as integers: the same frame, column types included."""
    from pseo_das.tasks.publication import release_files
    from pseo_das.tasks.publication.flows_files import read_flows_state
    from pseo_das.tasks.employment_flows.division_flows import (FLOWS_STATE_CODED_SCHEMA,
                                                                FLOWS_STATE_COLUMNS,
                                                                FLOWS_STATE_SCHEMA)
    monkeypatch.setattr(release_files, "PARQUET_ROW_GROUP_ROWS", 5)
    coded, text, csv = (tmp_path / name / "internal" for name in ("coded", "text", "csv"))
    for folder in (coded, text, csv):
        folder.mkdir(parents=True)
    other = table([LATE], [2010], ["00000003"])          # a table of other institutions
    blocks = [flows_state_rows(FLOWS, start, start + 2)[0] for start in (0, 2)] + \
        [flows_state_rows(other)[0]]
    assert blocks[0]["institution"].chunk(0).dictionary != blocks[2]["institution"].chunk(0).dictionary
    with release_files.ParquetTableWriter(coded / "flows_state.parquet",
                                          FLOWS_STATE_CODED_SCHEMA) as coded_file, \
            release_files.ParquetTableWriter(text / "flows_state.parquet",
                                             FLOWS_STATE_SCHEMA) as text_file, \
            release_files.CodeTableWriter(csv / "flows_state.csv", FLOWS_STATE_COLUMNS) as csv_file:
        for block in blocks:
            for writer in (coded_file, text_file, csv_file):
                writer.write(block)
    metadata = pq.ParquetFile(coded / "flows_state.parquet").metadata
    assert metadata.num_row_groups > len(blocks)
    # statistics for the counts, none for the coded text (a third of the writer's CPU)
    statistics = {metadata.schema.column(i).name: metadata.row_group(0).column(i).is_stats_set
                  for i in range(metadata.num_columns)}
    assert statistics == {field.name: not pa.types.is_dictionary(field.type)
                          for field in FLOWS_STATE_CODED_SCHEMA}
    assert statistics["noisy_count"] and not statistics["institution"]
    read = read_flows_state(coded)
    assert len(read) == sum(b.num_rows for b in blocks) > 0
    pd.testing.assert_frame_equal(read, read_flows_state(text))
    pd.testing.assert_frame_equal(read, read_flows_state(csv))
    assert read["noisy_count"].dtype == np.int64
    assert read["cipcode"].map(type).eq(str).all()
    with pytest.raises(FileNotFoundError, match="flows_state.parquet"):
        read_flows_state(tmp_path)
