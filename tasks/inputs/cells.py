"""The cell frame: which earnings cells exist. Privacy cost: none.

The frame comes from the graduates file only (never the outcomes): every institution x
degree level x field x graduation cohort with at least one graduate, for each years-after
that the whole cohort window can have by the last earnings year. Which programs an
institution graduated students from, and in which years, is published by institutions
through IPEDS completions, so the frame is treated as public: cells are never dropped
because they have no earnings records, and every bin of every frame cell gets noise.

Graduates are coded in the CIP vintage of their graduation year (CIP-2010 before the
configured switch year, CIP-2020 from it), so a measured cell is also keyed by its
`cip_vintage`: a cohort window that straddles the switch year has cells of both vintages,
and each graduate is still in exactly one cell. The recast (tasks/cip_recast) turns the
measured cells into CIP-2020 cells after the noise, from the noisy values only.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from pseo_das.config import CellsConfig
# The cell keys live with the schemas (the privacy store keys its measurements by them);
# the frame's users take them from here.
from pseo_das.schemas.cells import (ALL_COHORTS, ALL_FIELDS_CIPCODE, CELL_COLUMNS, CELL_KEYS,
                                    CIP_2010, CIP_2020, CIP_VINTAGES, MEASURED_CELL_COLUMNS,
                                    MEASURED_CELL_KEYS, NATIONAL_INSTITUTION, POPULATION_KEYS)


def in_populations(cells: pd.DataFrame, populations: pd.DataFrame) -> np.ndarray:
    """Which rows of `cells` belong to one of `populations` (POPULATION_KEYS)."""
    def keys(frame: pd.DataFrame) -> pd.MultiIndex:
        return pd.MultiIndex.from_arrays([frame["institution"].astype(str),
                                          frame["degree_level"].astype(str),
                                          frame["grad_cohort"].astype(np.int64)])
    return keys(cells).isin(keys(populations))


@dataclass
class CellFrame:
    """Institution-level cells at one CIP level, in canonical (sorted) order."""
    cip_level: str
    cells: pd.DataFrame          # MEASURED_CELL_COLUMNS
    graduate_cell: np.ndarray | None  # each graduate's cell (row of `cells`); None when counted in chunks

    def observable(self, years_after: int, last_earnings_year: int) -> np.ndarray:
        """Cells whose whole cohort window has `years_after` earnings by the last year."""
        end = self.cells["grad_cohort"] + self.cells["grad_cohort_years"] - 1
        return (end + years_after <= last_earnings_year).to_numpy()

    def measured_cells(self, years_after: int, last_earnings_year: int,
                       populations: pd.DataFrame | None = None) -> np.ndarray:
        """Observable cells, restricted to `populations` (institution, degree_level,
        grad_cohort) when given."""
        selected = self.observable(years_after, last_earnings_year)
        if populations is not None:
            selected = selected & in_populations(self.cells, populations)
        return selected


def observable_populations(frame: CellFrame, years_after: int, last_year: int) -> pd.DataFrame:
    """The populations (POPULATION_KEYS) of the frame's cells observable at `years_after`."""
    cells = frame.cells[frame.observable(years_after, last_year)]
    return population_frame(cells).drop_duplicates().reset_index(drop=True)


def population_frame(cells: pd.DataFrame) -> pd.DataFrame:
    """Each cell's population (POPULATION_KEYS), typed as the privacy store keys them."""
    return pd.DataFrame({"institution": cells["institution"].astype(str).to_numpy(),
                         "degree_level": cells["degree_level"].astype(str).to_numpy(),
                         "grad_cohort": cells["grad_cohort"].to_numpy(dtype=np.int64)})


def map_codes(codes: pd.Series, fn) -> pd.Series:
    """Apply `fn` to each distinct code of a categorical (not to each row); sorted result."""
    mapped = np.array([fn(c) for c in codes.cat.categories], dtype=object)
    distinct, inverse = np.unique(mapped, return_inverse=True)
    recoded = inverse[codes.cat.codes.to_numpy()]
    return pd.Series(pd.Categorical.from_codes(recoded, categories=distinct), index=codes.index)


# Keys per distinct slot above which ranking by a pass over the key space beats a sort.
DENSE_KEYS_PER_SLOT = 1 / 8


def dense_rank(key: np.ndarray, key_space: int) -> np.ndarray:
    """Rank of each key among the distinct keys (0, 1, ... in sorted order). Counting over
    the key space is linear in that space; a sort (linear-log in the keys) is faster when
    the space is much larger than the keys (measured: 1 million keys in a space of 32
    million, 18 ms sorted against 62 ms counted)."""
    if key_space > len(key) / DENSE_KEYS_PER_SLOT:
        return np.unique(key, return_inverse=True)[1].reshape(-1)
    present = np.zeros(key_space, dtype=bool)
    present[key] = True
    rank = np.cumsum(present, dtype=np.int64) - 1
    return rank[key]


def cip_code(cipcode: str, level: str) -> str:
    """'11.0701' -> '11' (2-digit), '1107' (4-digit), '00' (all fields)."""
    if level == "2":
        return cipcode[:2]
    if level == "4":
        return cipcode[:2] + cipcode[3:5]
    return ALL_FIELDS_CIPCODE


def coarser_cip(code: str, level: str) -> str:
    """A published CIP code ('1107' or '11') at a coarser level ('2' or 'A')."""
    return code[:2] if level == "2" else ALL_FIELDS_CIPCODE


SUMMED_WHOLE_ROWS = 32   # a group of more rows is summed by np.sum; smaller ones together


def sum_by_group(counts: np.ndarray, group: np.ndarray, n_groups: int) -> np.ndarray:
    """Rows of integer `counts` summed by `group` (0 to n_groups - 1, every group present),
    in group order. The groups' k-th rows are added to all groups at once, k = 1, 2, ...
    (a national flows table's groups have a few rows of 1,021 columns: np.add.reduceat took
    3 to 10 times as long, docs/develop/performance.md); a group of more than
    SUMMED_WHOLE_ROWS rows is summed alone. Integer sums are exact in any order. The sums
    keep the counts' dtype (32-bit flows stay 32-bit: sums of graduate counts are far below
    2^31)."""
    counts = np.asarray(counts)
    if counts.dtype.kind not in "iu":
        raise TypeError(f"sum_by_group sums integer counts, not {counts.dtype}")
    if len(counts) == 0:
        return np.zeros((0,) + counts.shape[1:], dtype=counts.dtype)
    order = np.argsort(group, kind="stable")
    in_order = group[order]
    starts = np.flatnonzero(np.r_[True, in_order[1:] != in_order[:-1]])
    if len(starts) != n_groups:
        raise ValueError(f"{n_groups} groups expected, {len(starts)} found")
    sizes = np.diff(np.append(starts, len(order)))
    out = np.empty((n_groups,) + counts.shape[1:], dtype=counts.dtype)
    for g in np.flatnonzero(sizes > SUMMED_WHOLE_ROWS):
        out[g] = counts[order[starts[g]:starts[g] + sizes[g]]].sum(axis=0, dtype=counts.dtype)
    small = np.flatnonzero(sizes <= SUMMED_WHOLE_ROWS)
    small = small[np.argsort(-sizes[small], kind="stable")]      # the larger groups first
    first, small_sizes = starts[small], sizes[small]
    summed = counts[order[first]]
    for k in range(1, int(small_sizes.max(initial=0))):
        n = np.count_nonzero(small_sizes > k)                     # the first n groups
        summed[:n] += counts[order[first[:n] + k]]
    out[small] = summed
    return out


def sorted_groups(columns: list) -> tuple[np.ndarray, np.ndarray, int]:
    """The distinct rows of `columns` (arrays or Series of one length) in sorted order, as a
    groupby's groups: each one's first row, each row's group (0 to n - 1) and n; one
    integer key per row from each column's sorted codes, not a groupby of a frame."""
    key, bound = np.zeros(len(columns[0]), dtype=np.int64), 1
    for column in columns:
        codes, uniques = pd.factorize(column, sort=True)
        if bound * len(uniques) >= 2 ** 62:   # renumber the keys so far: 0 to n - 1
            distinct, key = np.unique(key, return_inverse=True)
            bound = len(distinct)
        key, bound = key * len(uniques) + codes, bound * len(uniques)
    distinct, first, group = np.unique(key, return_index=True, return_inverse=True)
    return first, group, len(distinct)


def institution_blocks(cells: pd.DataFrame, block_cells: int) -> list[slice]:
    """Consecutive row ranges of `cells` of about `block_cells` rows that hold whole
    institutions (a cell and every cell it can be added to: the same institution); one
    range when the rows do not hold each institution together (or there are none)."""
    institution = cells["institution"].astype(str).to_numpy()
    if len(institution) == 0:
        return [slice(0, 0)]
    starts = np.flatnonzero(np.r_[True, institution[1:] != institution[:-1]])
    if len(starts) == 0 or len(set(institution[starts])) != len(starts):
        return [slice(0, len(institution))]
    bounds = [0]
    for start in starts[1:].tolist():
        if start - bounds[-1] >= block_cells:
            bounds.append(start)
    return [slice(a, b) for a, b in zip(bounds, bounds[1:] + [len(institution)])]


def sum_to_coarser(cells: pd.DataFrame, counts: np.ndarray, inst_level: str, cip_level: str,
                   source_cip_level: str, all_cohorts: bool = False
                   ) -> tuple[pd.DataFrame, np.ndarray]:
    """Sum the rows of `counts` (one per row of `cells`) into the cells of a coarser CIP
    level and/or the state (S) or national (N) level, and over every cohort when
    `all_cohorts` (grad_cohort ALL_COHORTS). Cells keep the columns of `cells`;
    `noise_terms` counts the summed noisy rows. Privacy cost: none (a sum)."""
    summed, group = coarser_cells(cells, inst_level, cip_level, source_cip_level, all_cohorts)
    return summed, sum_by_group(counts, group, len(summed))


def coarser_cells(cells: pd.DataFrame, inst_level: str, cip_level: str, source_cip_level: str,
                  all_cohorts: bool = False) -> tuple[pd.DataFrame, np.ndarray]:
    """The coarser cells of `sum_to_coarser` and, for each row of `cells`, its coarser
    cell (row of them): what a sum of the rows' counts needs, done block by block for a
    table too large to hold (`employment_flows.row_files.sum_rows`)."""
    coarse = cells
    if all_cohorts:
        coarse = coarse.assign(grad_cohort=ALL_COHORTS)
    if cip_level != source_cip_level:
        coarse = coarse.assign(cipcode=map_codes(coarse["cipcode"], lambda c: coarser_cip(c, cip_level)))
    if inst_level == "S":
        coarse = coarse.assign(institution=map_codes(coarse["inst_state"], lambda s: s.zfill(8)))
    elif inst_level == "N":
        coarse = coarse.assign(institution=map_codes(coarse["inst_state"], lambda s: NATIONAL_INSTITUTION),
                               inst_state=map_codes(coarse["inst_state"], lambda s: "00"))
    # a coarser cell: its first row (its rows share inst_state and grad_cohort_years), the
    # rows' noise terms added (a groupby's named aggregations cost 2x more on small tables)
    first, group, n_groups = sorted_groups([coarse[key] for key in CELL_KEYS])
    summed = coarse.iloc[first].reset_index(drop=True)
    summed["noise_terms"] = sum_by_group(coarse["noise_terms"].to_numpy(np.int64), group,
                                         n_groups)
    return summed[cells.columns], group


def cohort_attributes(graduates: pd.DataFrame, cfg: CellsConfig,
                      cip_switch_year: int | None = None) -> pd.DataFrame:
    """Per graduate: institution, state, degree level, CIP code and its vintage (CIP-2020
    from `cip_switch_year` on; CIP-2010 for everyone when None), cohort window start and
    length."""
    degree = graduates["degree_level"]
    window_by_code = np.array([cfg.cohort_years(d) for d in degree.cat.categories], dtype=np.int64)
    window = window_by_code[degree.cat.codes.to_numpy()]
    offset = graduates["grad_year"].to_numpy() - cfg.first_cohort_year
    return pd.DataFrame({
        "institution": graduates["institution"],
        "inst_state": graduates["inst_state"],
        "degree_level": degree,
        "coded_cipcode": graduates["cipcode"],
        "cip_vintage": pd.Categorical.from_codes(
            (graduates["grad_year"].to_numpy() >= (cip_switch_year or np.iinfo(np.int64).max))
            .astype(np.int8), categories=list(CIP_VINTAGES)),
        "grad_cohort": cfg.first_cohort_year + (offset // window) * window,
        "grad_cohort_years": window,
    })


def cell_frame(attributes: pd.DataFrame, cip_level: str) -> CellFrame:
    """Cells at `cip_level` with at least one graduate, sorted by MEASURED_CELL_KEYS. All
    fields ('00') is the same code in both vintages: its cells are not split by vintage."""
    cip = map_codes(attributes["coded_cipcode"], lambda c: cip_code(c, cip_level))
    keyed = attributes.drop(columns="coded_cipcode").assign(cipcode=cip)
    if cip_level == "A":
        keyed["cip_vintage"] = pd.Categorical.from_codes(np.ones(len(keyed), np.int8),
                                                         categories=list(CIP_VINTAGES))
    # Sorted categories make category codes sort like the codes themselves, so one integer
    # key per graduate sorts cells in canonical (institution, degree, vintage, CIP, cohort)
    # order.
    parts = [keyed[k].cat.codes.to_numpy().astype(np.int64) for k in MEASURED_CELL_KEYS[:4]]
    parts.append(keyed["grad_cohort"].to_numpy() - int(keyed["grad_cohort"].min()))
    key_space = [int(p.max()) + 1 for p in parts]
    graduate_cell = dense_rank(np.ravel_multi_index(parts, key_space), int(np.prod(key_space)))
    member = np.empty(graduate_cell.max() + 1, dtype=np.int64)
    member[graduate_cell] = np.arange(len(graduate_cell))
    cells = keyed.iloc[member].reset_index(drop=True)[MEASURED_CELL_COLUMNS]
    return CellFrame(cip_level, cells, graduate_cell)
