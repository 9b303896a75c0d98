"""Cell frame, derived levels and suppression invariants on small hand-made inputs."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from pseo_das.config import load_config
from pseo_das.tasks.inputs.cells import cell_frame, cip_code, cohort_attributes
from pseo_das.tasks.earnings.histograms import earnings_records, true_histograms
from pseo_das.tasks.inputs.ingest import read_inputs
from pseo_das.tasks.privacy.ledger import PrivacyLedger
from pseo_das.tasks.earnings.noisy_histograms import NoisyHistograms, derive_histograms
from pseo_das.tasks.privacy.geometric import measure_with_geometric_noise
from pseo_das.tasks.privacy.statement import geometric_statement
from pseo_das.tasks.earnings import earnings_tables
from pseo_das.tasks.earnings.earnings_tables import (STATUS_NOT_AVAILABLE, STATUS_OK,
                                                     STATUS_SUPPRESSED, earnings_table,
                                                     histogram_publication)
from test_ingest import valid_graduates, valid_outcomes, write

CFG = load_config()
SEED = bytes(32)


def publication_tables(tables, cfg):
    """(pseoe_all, pseoh_all, per-cell summary) of `tables`, as a release builds them."""
    pseoh, cells = histogram_publication(tables, cfg)
    return earnings_table(cells, cfg), whole(pseoh), cells


def whole(pseoh) -> pd.DataFrame:
    """pseoh_all's rows as one frame."""
    return pd.concat(list(pseoh.blocks()))


def test_cip_codes_at_each_level():
    assert [cip_code("11.0701", lvl) for lvl in ("2", "4", "A")] == ["11", "1107", "00"]


def test_cohort_windows_align_to_first_year():
    graduates = pd.DataFrame({
        "institution": pd.Categorical(["00000100"] * 12), "inst_state": pd.Categorical(["08"] * 12),
        "degree_level": pd.Categorical(["05"] * 6 + ["07"] * 6), "cipcode": pd.Categorical(["11.0701"] * 12),
        "grad_year": [2001, 2002, 2003, 2004, 2006, 2007, 2001, 2005, 2006, 2010, 2011, 2020]})
    attributes = cohort_attributes(graduates, CFG.cells)
    assert attributes["grad_cohort"].tolist() == [2001, 2001, 2001, 2004, 2004, 2007,
                                                  2001, 2001, 2006, 2006, 2011, 2016]
    assert attributes["grad_cohort_years"].tolist() == [3] * 6 + [5] * 6


@pytest.fixture
def inputs(tmp_path):
    return read_inputs(write(tmp_path, valid_graduates(), valid_outcomes()), 2001, 2022)


def measure_histograms(cells, counts):
    statement = geometric_statement("earnings.I.cip4.y1", "earnings histograms", "m", 1.0,
                                    CFG.earnings.n_bins)
    return measure_with_geometric_noise(SEED, statement, cells, counts)


def test_frame_comes_from_graduates_and_every_bin_gets_noise(inputs):
    frame = cell_frame(cohort_attributes(inputs.graduates, CFG.cells), "4")
    # Six graduates, six distinct cells; graduate 6 (2020 cohort 2016-2020) has no outcomes.
    assert len(frame.cells) == 6
    records = earnings_records(inputs, 1, CFG.earnings.bin_edges, CFG.earnings.sample_floor)
    # In the universe at 1 year: persons 1 (30,000), 3 (72,000), 4 (41,000); 2 and 5 are below the floor.
    assert len(records.bin) == 3
    cells, counts = true_histograms(frame, records, CFG.cells.last_earnings_year, CFG.earnings.n_bins)
    # Observable at y1: every cohort window ends by 2021, so all six cells, zero rows included.
    assert len(cells) == 6 and counts.sum() == 3 and (counts.sum(axis=1) == 0).sum() == 3
    noisy = measure_histograms(cells, counts)
    assert noisy.values.shape == (6, 21) and (noisy.values[counts.sum(axis=1) == 0] != 0).any()
    # At 10 years only cohorts ending by 2012 exist: 2001-2003 (05), 2001-2005 (05) and 2006-2010 (07).
    cells10, _ = true_histograms(frame, earnings_records(inputs, 10, CFG.earnings.bin_edges, 10000),
                                 CFG.cells.last_earnings_year, CFG.earnings.n_bins)
    assert sorted(cells10["grad_cohort"]) == [2001, 2004, 2006]


def test_input_row_order_does_not_change_the_noise(tmp_path, inputs):
    shuffled = tmp_path / "shuffled"
    shuffled.mkdir()
    write(shuffled, valid_graduates().sample(frac=1, random_state=3),
          valid_outcomes().sample(frac=1, random_state=4))
    results = []
    for data in (inputs, read_inputs(shuffled, 2001, 2022)):
        frame = cell_frame(cohort_attributes(data.graduates, CFG.cells), "4")
        cells, counts = true_histograms(frame, earnings_records(data, 1, CFG.earnings.bin_edges, 10000),
                                        2022, CFG.earnings.n_bins)
        results.append(measure_histograms(cells, counts))
    pd.testing.assert_frame_equal(results[0].cells, results[1].cells)
    np.testing.assert_array_equal(results[0].values, results[1].values)


def institution_table() -> NoisyHistograms:
    cells = pd.DataFrame({
        "institution": pd.Categorical(["00000100", "00000100", "00000200", "00000300"]),
        "inst_state": pd.Categorical(["08", "08", "08", "48"]),
        "degree_level": pd.Categorical(["05"] * 4),
        "cipcode": pd.Categorical(["1107", "1101", "1107", "5202"]),
        "grad_cohort": [2001] * 4, "grad_cohort_years": [3] * 4, "noise_terms": [1] * 4})
    counts = np.arange(4 * 21).reshape(4, 21) - 5
    return NoisyHistograms("earnings.I.cip4.y1", "I", "4", 1, cells, counts, ("earnings.I.cip4.y1",))


def test_derived_levels_are_sums_and_record_zero_epsilon():
    entries = []

    def derive(source, inst_level, cip_level):
        table, entry = derive_histograms(source, inst_level, cip_level)
        entries.append(entry)
        return table

    table = institution_table()
    cip2 = derive(table, "I", "2")
    assert cip2.cells["cipcode"].astype(str).tolist() == ["11", "11", "52"]
    np.testing.assert_array_equal(cip2.counts[0], table.counts[0] + table.counts[1])
    assert cip2.cells["noise_terms"].tolist() == [2, 1, 1]
    state = derive(table, "S", "4")
    keyed = {(i, c): row for i, c, row in zip(state.cells["institution"].astype(str),
                                              state.cells["cipcode"].astype(str), state.counts)}
    np.testing.assert_array_equal(keyed[("00000008", "1107")], table.counts[0] + table.counts[2])
    np.testing.assert_array_equal(keyed[("00000048", "5202")], table.counts[3])
    national = derive(derive(cip2, "I", "A"), "N", "A")
    np.testing.assert_array_equal(national.counts[0], table.counts.sum(axis=0))
    assert national.cells["noise_terms"].tolist() == [4]
    ledger = PrivacyLedger.of(10, entries)
    assert ledger.total_epsilon == 0 and len(ledger.entries) == 4


def test_suppression_exactly_where_noisy_count_is_below_30():
    table = institution_table()
    counts = np.zeros((4, 21), dtype=np.int64)
    counts[:, 5] = [29, 30, 31, 100]
    counts[0, 0], counts[0, 1] = 5, -5          # noisy total 29: suppressed even with big bins
    y1 = NoisyHistograms("t1", "I", "4", 1, table.cells, counts, ("t1",))
    y5 = NoisyHistograms("t5", "I", "4", 5, table.cells.iloc[[1]].reset_index(drop=True),
                         np.full((1, 21), -1), ("t5",))
    pseoe, pseoh, cells = publication_tables([y1, y5], CFG.earnings)
    assert pseoe["status_y1_earnings"].tolist().count(STATUS_SUPPRESSED) == 1
    suppressed = pseoe[pseoe["status_y1_earnings"] == STATUS_SUPPRESSED]
    assert suppressed["cipcode"].tolist() == ["11.07"] and suppressed["institution"].tolist() == ["00000100"]
    assert suppressed[["y1_p25_earnings", "y1_p50_earnings", "y1_p75_earnings", "y1_grads_earn"]].isna().all().all()
    published = pseoe[pseoe["status_y1_earnings"] == STATUS_OK]
    assert sorted(published["y1_grads_earn"].tolist()) == [30, 31, 100] and len(pseoe) == 4
    # y5: one cell with a negative total (suppressed), the rest not observable; y10: none.
    assert sorted(pseoe["status_y5_grads_earn"].tolist()) == [-1, -1, -1, 5]
    assert (pseoe["status_y10_earnings"] == STATUS_NOT_AVAILABLE).all()
    # The histograms file holds exactly the published cell-years, 21 bins each.
    assert len(pseoh) == 3 * 21 and set(pseoh["years_after"]) == {1}
    assert int(cells["published"].sum()) == 3
    # the summary as a release passes it (codes as categoricals) gives the same table
    pd.testing.assert_frame_equal(
        earnings_table(earnings_tables.text_as_categories(cells), CFG.earnings), pseoe)
    # a cell twice for one years after is refused (it has one row of pseoe_all)
    with pytest.raises(ValueError, match="a cell twice for 1 years after"):
        earnings_table(pd.concat([cells, cells.iloc[[0]]], ignore_index=True), CFG.earnings)


def histogram_rows(cells, counts, cfg):
    """pseoh_all row by row, as the file reads: the published cell-years in the identifiers'
    order, each with its bins; identifiers as text."""
    keys = ["agg_level_pseo", "institution", "degree_level", "cipcode", "grad_cohort",
            "years_after"]
    published = cells[cells["published"]].sort_values(keys, kind="stable")
    rows = []
    for index, cell in published.iterrows():
        for b in range(cfg.n_bins):
            rows.append({**{name: cell[name] for name in earnings_tables.IDENTIFIERS
                            if name in cell.index},
                         "geo_level": "N", "geography": "00", "ind_level": "A", "industry": "00",
                         "years_after": cell["years_after"], "bin": b + 1,
                         "bin_lower": cfg.bin_edges[b], "bin_upper": cfg.bin_upper[b],
                         "noisy_count": counts[index, b]})
    return pd.DataFrame(rows)[earnings_tables.IDENTIFIERS + ["years_after", "bin", "bin_lower",
                                                             "bin_upper", "noisy_count"]]


def test_histogram_table_is_the_published_histograms_row_by_row_with_coded_text():
    """pseoh_all holds its text codes as categories and its integers in their smallest types
    (a national table is millions of rows); as text and int64 it is the published
    cell-years' bins, row by row, in the identifiers' order."""
    table = institution_table()
    counts = np.arange(4 * 21).reshape(4, 21) % 7 + np.array([[0], [40], [2], [30]])
    counts[0] = np.arange(21) % 2                                # 10 graduates: suppressed
    y1 = NoisyHistograms("t1", "I", "4", 1, table.cells, counts, ("t1",))
    y5 = NoisyHistograms("t5", "I", "4", 5, table.cells.iloc[[3, 1]].reset_index(drop=True),
                         counts[[1, 3]] + 5, ("t5",))
    at2, _ = derive_histograms(y1, "I", "2")
    tables = [y1, y5, at2]
    _, pseoh, cells = publication_tables(tables, CFG.earnings)
    assert isinstance(pseoh["institution"].dtype, pd.CategoricalDtype)
    assert pseoh["agg_level_pseo"].dtype == np.int8 and pseoh["bin_lower"].dtype == np.int32
    expected = histogram_rows(cells, np.concatenate([t.counts for t in tables]), CFG.earnings)
    assert 0 < int(cells["published"].sum()) < len(cells)
    pd.testing.assert_frame_equal(earnings_tables.categories_as_text(pseoh), expected,
                                  check_dtype=False)


def test_histogram_schema_is_checked_on_every_block_of_rows(monkeypatch):
    """The output schema runs on pseoh_all's rows a block of rows at a time: a fault in any
    block fails it, naming the row by its index in the whole table."""
    import pandera.errors
    table = institution_table()
    y1 = NoisyHistograms("t1", "I", "4", 1, table.cells, np.full((4, 21), 10), ("t1",))
    _, pseoh, _ = publication_tables([y1], CFG.earnings)
    monkeypatch.setattr(earnings_tables, "PSEOH_BLOCK_ROWS", 20)
    earnings_tables.check_histogram_rows(pseoh)
    for row in (0, 19, 20, len(pseoh) - 1):
        broken = pseoh.copy()
        broken.loc[row, "bin"] = 0
        with pytest.raises(pandera.errors.SchemaErrors) as failed:
            earnings_tables.check_histogram_rows(broken)
        assert failed.value.failure_cases["index"].tolist() == [row]
    cohorts_as_numbers = pseoh.assign(
        grad_cohort=pseoh["grad_cohort"].astype(int).astype("category"))
    with pytest.raises(pandera.errors.SchemaErrors):
        earnings_tables.check_histogram_rows(cohorts_as_numbers)


def test_histogram_schema_is_checked_on_each_histogram_and_each_bin():
    """pseoh_all is checked on each histogram's identifiers and on each bin once: a fault
    in any histogram or any bin fails it, naming the row (a histogram's first row, a bin's
    row in the first histogram); a table without faults passes."""
    import pandera.errors
    from dataclasses import replace
    table = institution_table()
    y1 = NoisyHistograms("t1", "I", "4", 1, table.cells, np.full((4, 21), 10), ("t1",))
    pseoh, _ = histogram_publication([y1], CFG.earnings)
    earnings_tables.check_histogram_table(pseoh)
    n_bins = CFG.earnings.n_bins
    faults = []
    for histogram in range(len(pseoh.cells)):
        cells = pseoh.cells.copy()
        cells.loc[histogram, "grad_cohort_years"] = 0
        faults.append((replace(pseoh, cells=cells), histogram * n_bins))
    for b in (0, 4, n_bins - 1):
        bins = pseoh.bins.copy()
        bins.loc[b, "bin_lower"] = -1
        faults.append((replace(pseoh, bins=bins), b))
    faults[-3] = (faults[-3][0], [h * n_bins for h in range(len(pseoh.cells))])  # every first
    for broken, row in faults:
        with pytest.raises(pandera.errors.SchemaErrors) as failed:
            earnings_tables.check_histogram_table(broken)
        assert failed.value.failure_cases["index"].tolist() == (row if isinstance(row, list)
                                                                else [row])
    cohorts_as_numbers = replace(pseoh, cells=pseoh.cells.assign(
        grad_cohort=pseoh.cells["grad_cohort"].astype(int).astype("category")))
    with pytest.raises(pandera.errors.SchemaErrors):
        earnings_tables.check_histogram_table(cohorts_as_numbers)
    empty, _ = histogram_publication([replace(y1, counts=np.zeros((4, 21), np.int64))],
                                     CFG.earnings)
    assert len(empty) == 0
    earnings_tables.check_histogram_table(empty)


def test_all_cohort_cells_sum_the_cohorts_and_are_written_0000():
    table = institution_table()
    cells = table.cells.assign(grad_cohort=[2001, 2004, 2001, 2001])   # 100/1101 is 2004
    cells["cipcode"] = pd.Categorical(["1107", "1107", "1107", "5202"])
    table = NoisyHistograms(table.tabulation_id, "I", "4", 1, cells, table.counts, ("t",))
    every, entry = derive_histograms(table, "I", "4", by_cohort=False)
    assert entry.epsilon == 0 and entry.tabulation_id == "earnings.I.cip4.all-cohorts.y1"
    assert every.cells["grad_cohort"].tolist() == [0, 0, 0]
    np.testing.assert_array_equal(every.counts[0], table.counts[0] + table.counts[1])
    assert every.cells["noise_terms"].tolist() == [2, 1, 1]
    state, _ = derive_histograms(every, "S", "4", by_cohort=False)
    pseoe, _, _ = publication_tables([table, every, state], CFG.earnings)
    assert set(pseoe["grad_cohort"]) == {"2001", "2004", "0000"}
    at_state = pseoe[pseoe["inst_level"] == "S"]
    assert set(at_state["institution"]) == {"08", "48"}
    assert set(at_state["agg_level_pseo"]) == {30}              # state x 4-digit, all cohorts
    assert set(pseoe.loc[pseoe["grad_cohort"] != "0000", "agg_level_pseo"]) == {48}
    assert list(pseoe.columns[:12]) == ["agg_level_pseo", "inst_level", "institution",
                                        "degree_level", "cip_level", "cipcode", "grad_cohort",
                                        "grad_cohort_years", "geo_level", "geography",
                                        "ind_level", "industry"]


@pytest.mark.parametrize("degree, restricted", [("07", True), ("17", True), ("05", False)])
def test_restricted_4_digit_cells_publish_nothing(degree, restricted):
    table = institution_table()
    cells = table.cells.assign(degree_level=pd.Categorical([degree] * 4))
    counts = np.full((4, 21), 10)                               # 210 each: large enough
    at4 = NoisyHistograms("t", "I", "4", 1, cells, counts, ("t",))
    at2, _ = derive_histograms(at4, "I", "2")
    pseoe, pseoh, _ = publication_tables([at4, at2], CFG.earnings)
    four, two = pseoe[pseoe["cip_level"] == "4"], pseoe[pseoe["cip_level"] == "2"]
    flags = four.filter(regex="^status_y.*_(earnings|grads_earn)$")
    assert (flags == STATUS_SUPPRESSED).all().all() == restricted
    assert four.filter(regex=r"^y\d+_").isna().all().all() == restricted
    assert (two["status_y1_earnings"] == STATUS_OK).all()       # 2-digit rows are published
    assert (set(pseoh["cip_level"]) == {"2"}) == restricted
    assert (pseoe.filter(like="ipeds_count").filter(like="status") == 3).all().all()


def test_dense_rank_matches_a_sort():
    import pseo_das.tasks.inputs.cells as cells_module
    key = np.random.default_rng(5).integers(0, 1000, 5000)
    expected = np.unique(key, return_inverse=True)[1]
    np.testing.assert_array_equal(cells_module.dense_rank(key, 1000), expected)  # counted
    np.testing.assert_array_equal(cells_module.dense_rank(key, 10 ** 9), expected)  # sorted


def test_a_failed_check_stops_publication():
    from pseo_das.tasks.publication.assemble import ReleaseCheckFailed, stop_on_failed_checks
    passed = [{"name": "a", "result": "passed (3 rows)"}]
    assert stop_on_failed_checks(passed) == passed
    with pytest.raises(ReleaseCheckFailed, match="b: FAILED \\(2 / 3\\)"):
        stop_on_failed_checks(passed + [{"name": "b", "result": "FAILED (2 / 3)"}])


def test_the_kept_cell_summary_gives_the_documents_the_same_tables():
    """What a release keeps of the per-cell summary once the earnings files are written
    gives the variance and suppression tables, the cell counts and the consistency cells of
    the full summary; its codes are categoricals."""
    from pseo_das.tasks.publication.document_context import (suppression_summary,
                                                             variance_summary)
    table = institution_table()
    cells = table.cells.assign(grad_cohort=[2001, 2004, 2001, 2001])
    table = NoisyHistograms(table.tabulation_id, "I", "4", 1, cells, table.counts, ("t",))
    tables = [table] + [derive_histograms(table, inst, cip, by_cohort=by)[0]
                        for inst, cip, by in [("I", "2", True), ("S", "4", True),
                                              ("I", "4", False), ("S", "4", False)]]
    _, _, full = publication_tables(tables, CFG.earnings)
    kept = earnings_tables.kept_cell_summary(full)
    assert list(kept.columns) == earnings_tables.KEPT_CELL_COLUMNS
    assert isinstance(kept["institution"].dtype, pd.CategoricalDtype)
    assert kept["institution"].cat.categories.tolist() == sorted(set(full["institution"]))
    assert variance_summary(kept, CFG) == variance_summary(full, CFG)
    assert suppression_summary(kept) == suppression_summary(full)
    assert len(suppression_summary(full)) > 4 and int(kept["published"].sum()) > 0
    for column in ["institution", "degree_level", "grad_cohort", "inst_level", "cip_level"]:
        assert kept[column].astype(str).tolist() == full[column].astype(str).tolist()


def test_the_kept_earnings_table_writes_the_same_files(tmp_path):
    """pseoe_all as a release keeps it once written (codes as categoricals, flags as int8)
    gives the same state files, byte for byte, as the table it was written from."""
    from pseo_das.tasks.publication.metadata_files import state_files
    from pseo_das.tasks.publication.release_files import write_code_table
    table = institution_table()
    tables = [table] + [derive_histograms(table, inst, cip, by_cohort=by)[0]
                        for inst, cip, by in [("I", "2", True), ("S", "4", True),
                                              ("I", "4", False)]]
    pseoe, _, _ = publication_tables(tables, CFG.earnings)
    kept = earnings_tables.kept_earnings_table(pseoe)
    assert isinstance(kept["cipcode"].dtype, pd.CategoricalDtype)
    assert kept["status_y1_earnings"].dtype == np.int8
    assert kept["status_y1_earnings"].tolist() == pseoe["status_y1_earnings"].tolist()
    states = {"00000100": "08", "00000200": "08", "00000300": "48"}
    written = {}
    for name, frame in [("as built", pseoe), ("kept", kept)]:
        files = state_files(frame, states, "pseoe")
        assert list(files) == ["pseoe_co.csv", "pseoe_tx.csv"]
        for file_name, rows in files.items():
            write_code_table(rows, tmp_path / f"{name}-{file_name}")
        written[name] = [(tmp_path / f"{name}-{f}").read_bytes() for f in files]
    assert written["kept"] == written["as built"]


def test_pseoh_all_in_its_smallest_integers_writes_the_same_files(tmp_path):
    """pseoh_all as a release holds it (each integer column in its smallest integer type)
    gives the same national file, Parquet copy and explorer histograms, byte for byte, as
    the same table in int64, and as the same table written in other blocks of rows."""
    from dataclasses import replace
    from pseo_das.schemas.distribution import TableFormat
    from pseo_das.tasks.publication.assemble import write_pseoh
    table = institution_table()
    table = NoisyHistograms(table.tabulation_id, "I", "4", 1, table.cells,
                            table.counts * 1000, table.measured_from)   # counts beyond int8
    tables = [table] + [derive_histograms(table, inst, cip, by_cohort=by)[0]
                        for inst, cip, by in [("I", "2", True), ("S", "4", True)]]
    pseoh, cells = histogram_publication(tables, CFG.earnings)
    rows = whole(pseoh)
    assert rows["bin"].dtype == np.int8 and rows["noisy_count"].dtype == np.int32
    as_int64 = replace(pseoh, cells=pseoh.cells.astype(
        {name: np.int64 for name, dtype in pseoh.cells.dtypes.items()
         if pd.api.types.is_integer_dtype(dtype)}), counts=pseoh.counts.astype(np.int64),
        bins=pseoh.bins.astype(np.int64))

    class InSmallBlocks(type(pseoh)):
        def blocks(self, rows=0):   # one histogram at a time
            return super().blocks(1)

    written = {}
    for name, histograms in [("int64", as_int64), ("smallest", pseoh),
                             ("blocks", InSmallBlocks(pseoh.cells, pseoh.counts, pseoh.bins))]:
        public = tmp_path / name
        (public / "all").mkdir(parents=True)
        _, units = write_pseoh(histograms, public, TableFormat.CSV_GZ, parquet=True)
        files = sorted(p for p in public.rglob("*") if p.is_file())
        written[name] = ([(p.relative_to(public), p.read_bytes()) for p in files],
                         {unit: units[unit] for unit in ["00000100", "00000200", "08"]})
    assert len(written["smallest"][0]) == 2     # pseoh_all.csv.gz and its Parquet copy
    assert written["smallest"] == written["int64"] == written["blocks"]
    assert len(pseoh) == len(rows) == int(cells["published"].sum()) * CFG.earnings.n_bins


def test_explorer_histograms_of_the_histograms_are_those_of_the_table_rows():
    """The explorer's histograms a release makes of pseoh_all's histograms (sorting
    histograms) are those of its rows as read from the file (sorting rows): the same units,
    cells, counts and order, for a table whose levels interleave the institutions."""
    from pseo_das.schemas.pseo_layout import Product, layout
    from pseo_das.tasks.publication.explorer_data import (HistogramUnits, _as_read,
                                                          written_histograms)
    table = institution_table()
    table = NoisyHistograms(table.tabulation_id, "I", "4", 1, table.cells,
                            table.counts + 40, table.measured_from)
    tables = [table] + [derive_histograms(table, inst, cip, by_cohort=by)[0]
                        for inst, cip, by in [("I", "2", True), ("S", "4", True),
                                              ("I", "4", False)]]
    pseoh, _ = histogram_publication(tables, CFG.earnings)
    rows = _as_read(whole(pseoh), list(layout(Product.PSEOE).identifiers))
    by_rows = HistogramUnits(rows)
    by_histograms = written_histograms(pseoh.cells, pseoh.counts, pseoh.bins)
    assert [(unit, list(by_histograms[unit].items())) for unit in by_histograms] == \
        [(unit, list(by_rows[unit].items())) for unit in by_rows]
    assert by_histograms.bins == by_rows.bins and by_histograms.rows == by_rows.rows == len(pseoh)
    assert len(by_rows["00000100"]) == 5   # 2 fields at cip 4 by and all cohorts, 1 at cip 2


def test_per_cell_summary_is_the_tables_summaries_as_sorted_categories():
    """The per-cell summary is made with its codes as categories table by table: the same
    frame, categories in the same sorted order, as all tables' text summaries made into
    categories at once."""
    table = institution_table()
    tables = [table] + [derive_histograms(table, inst, cip, by_cohort=by)[0]
                        for inst, cip, by in [("S", "4", True), ("I", "2", False)]]
    _, cells = histogram_publication(tables, CFG.earnings)
    text = pd.concat([earnings_tables.cell_years(t, CFG.earnings, 1.0) for t in tables],
                     ignore_index=True)
    pd.testing.assert_frame_equal(cells, earnings_tables.text_as_categories(text))
    assert cells["institution"].cat.categories.tolist() == ["00000100", "00000200", "00000300",
                                                            "08", "48"]


def test_the_recheck_compares_every_published_value_and_finds_each_that_differs():
    """recheck_percentiles recomputes every published percentile and count of pseoe_all
    from pseoh_all's rows: none differ as built; a changed value, a histogram that is not
    there and a cell-year twice are found."""
    from dataclasses import replace
    table = institution_table()
    table = NoisyHistograms(table.tabulation_id, "I", "4", 1, table.cells,
                            table.counts + 40, table.measured_from)
    tables = [table] + [derive_histograms(table, inst, cip, by_cohort=by)[0]
                        for inst, cip, by in [("I", "2", True), ("S", "4", True)]]
    pseoh, cells = histogram_publication(tables, CFG.earnings)
    pseoe = earnings_table(cells, CFG.earnings)
    per_row = len(CFG.earnings.percentiles) + 1
    published = sum(int((pseoe[f"status_y{k}_earnings"] == STATUS_OK).sum()) for k in (1, 5, 10))
    assert published > 3
    recheck = earnings_tables.recheck_percentiles
    assert recheck(pseoe, pseoh, CFG.earnings) == (published * per_row, 0)
    changed = pseoe.copy()
    row = changed.index[changed["status_y1_earnings"] == STATUS_OK][1]
    changed.loc[row, "y1_p50_earnings"] += 1
    assert recheck(changed, pseoh, CFG.earnings) == (published * per_row, 1)
    fewer = replace(pseoh, cells=pseoh.cells.iloc[1:].reset_index(drop=True),
                    counts=pseoh.counts[1:])
    assert recheck(pseoe, fewer, CFG.earnings) == (published * per_row, per_row)
    with pytest.raises(RuntimeError, match="twice"):
        recheck(pd.concat([pseoe, pseoe.iloc[[row]]]), pseoh, CFG.earnings)
