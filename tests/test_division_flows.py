"""Division flows and division suppression (001 A.3.3) on a hand-built coverage case."""
import numpy as np
import pandas as pd

from pseo_das.schemas.codes import NAICS_SECTORS, STATE_FIPS, STATUS_NOT_AVAILABLE, STATUS_OK, STATUS_SUPPRESSED
from pseo_das.tasks.employment_flows.division_flows import (cell_rows, flows_table, institution_state_flows,
                                  unobserved_division_share, unobserved_states)
from pseo_das.tasks.employment_flows.flow_counts import N_DESTINATIONS, N_STATES, NONEMPLOYED
from pseo_das.tasks.employment_flows.noisy_flows import NoisyFlows

MOUNTAIN, PACIFIC = "08", "09"   # geography codes of Census divisions 8 and 9
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


def test_division_flows_suppressed_exactly_where_the_share_exceeds_the_maximum():
    missing = unobserved_states(FLOWS, covered)
    share = unobserved_division_share(FLOWS, missing, institution_state_flows([FLOWS], [missing]))
    rows = cell_rows(FLOWS, share, share_max=0.1)
    pseof = flows_table(rows, (1, 5))
    division = pseof[pseof["geo_level"] == "D"].set_index(["institution", "grad_cohort", "geography"])
    suppressed = division[division["status_y1_grads_emp"] == STATUS_SUPPRESSED].index.tolist()
    assert suppressed == [("00000001", 2001, MOUNTAIN),  # 0.3 > 0.1; Pacific's 0.1 is not above
                          ("00000002", 2001, MOUNTAIN), ("00000002", 2001, PACIFIC)]
    assert division["y1_grads_emp"][suppressed].isna().all()
    assert (division.loc[suppressed, "status_y1_grads_nme"] == STATUS_OK).all()
    assert (pseof.filter(like="status_y5_") == STATUS_NOT_AVAILABLE).all().all()


def test_division_and_national_sums_equal_the_state_flows():
    missing = unobserved_states(FLOWS, covered)
    share = unobserved_division_share(FLOWS, missing, institution_state_flows([FLOWS], [missing]))
    pseof = flows_table(cell_rows(FLOWS, share, share_max=1.0), (1,))
    late = pseof[pseof["grad_cohort"] == 2010].set_index(["geo_level", "geography", "ind_level", "industry"])
    assert late.loc[("D", MOUNTAIN, "A", "00"), "y1_grads_emp"] == 100      # 08 + 04 + 49
    assert late.loc[("D", PACIFIC, "A", "00"), "y1_grads_emp"] == 50        # 06 + 41
    assert late.loc[("D", MOUNTAIN, "A", "00"), "y1_grads_emp_instate"] == 50
    assert late.loc[("D", PACIFIC, "A", "00"), "y1_grads_emp_instate"] == 0
    assert late.loc[("N", "00", "A", "00"), "y1_grads_emp"] == 150
    assert late.loc[("N", "00", "S", "54"), "y1_grads_emp"] == 150
    assert late.loc[("N", "00", "S", "11"), "y1_grads_emp"] == 0
    assert (late["y1_grads_nme"] == 3).all()
