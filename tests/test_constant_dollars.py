"""Constant dollars: each record is deflated to the bins' 2016 dollars with the CPI-U of its
earnings year (grad_year + years_after) before binning, years without a CPI are refused
before any noise, and the publication factor is the exact CPI ratio."""
from __future__ import annotations

from decimal import Decimal
from fractions import Fraction

import numpy as np
import pytest

from pseo_das.config import load_config
from pseo_das.tasks.earnings.histograms import earnings_records
from pseo_das.tasks.inputs.constant_dollars import dollar_years, in_constant_dollars
from pseo_das.tasks.inputs.cpi import ConsumerPrices, read_cpi
from pseo_das.tasks.inputs.ingest import InputValidationError, read_inputs
from test_ingest import valid_graduates, valid_outcomes, write

CFG = load_config()
# BLS CPI-U annual averages, CUUR0000SA0 (from the BLS tables, not from the packaged file)
CPI = {2002: 179.9, 2006: 201.6, 2011: 224.939, 2016: 240.007, 2019: 255.657, 2023: 304.702}


def test_records_are_deflated_by_the_cpi_of_their_earnings_year(tmp_path):
    inputs = read_inputs(write(tmp_path, valid_graduates(), valid_outcomes()), 2001, 2022)
    deflated = in_constant_dollars.fn(inputs, read_cpi(), 2016)
    nominal = inputs.outcomes["earnings"].to_numpy()
    grad_year = inputs.graduates["grad_year"].to_numpy()[inputs.graduate_row]
    year = grad_year + inputs.outcomes["years_after"].to_numpy()
    expected = np.array([n * CPI[2016] / CPI[y] if not np.isnan(n) else np.nan
                         for n, y in zip(nominal, year)])
    np.testing.assert_allclose(deflated.outcomes["earnings"].to_numpy(), expected, rtol=1e-12)
    assert np.isnan(deflated.outcomes["earnings"].to_numpy()).sum() == np.isnan(nominal).sum()
    # person 1: $30,000 in 2002 is $40,023 in 2016 dollars, in the 6th bin (36,128-40,449);
    # nominal it would be in the 4th (27,512-31,857)
    records = earnings_records(deflated, 1, CFG.earnings.bin_edges, CFG.earnings.sample_floor)
    first = records.bin[list(records.graduate_row).index(0)]
    assert (30000 * CPI[2016] / CPI[2002], first) == (pytest.approx(40023.40, abs=0.01), 5)
    nominal_records = earnings_records(inputs, 1, CFG.earnings.bin_edges,
                                       CFG.earnings.sample_floor)
    assert nominal_records.bin[list(nominal_records.graduate_row).index(0)] == 3


def test_a_year_without_cpi_is_refused(tmp_path):
    inputs = read_inputs(write(tmp_path, valid_graduates(), valid_outcomes()), 2001, 2022)
    short = ConsumerPrices({2016: Decimal("240.007"), 2002: Decimal("179.9")}, "x", tmp_path / "cu")
    with pytest.raises(InputValidationError, match=r"no CPI-U annual average \(CUUR0000SA0, M13\) "
                       r"for 2006, 2011, 2019"):
        in_constant_dollars.fn(inputs, short, 2016)


def test_the_publication_factor_is_the_exact_cpi_ratio():
    dollars = dollar_years(read_cpi(), 2016, 2023)
    assert dollars.factor == Fraction(304702, 240007)
    assert dollars.as_dict() == {"dollar_year": 2016, "publication_year": 2023,
                                 "cpi": {"2016": "240.007", "2023": "304.702"}}
