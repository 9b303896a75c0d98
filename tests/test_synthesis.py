"""`pseo-das synthesize`: sequential CART synthetic microdata (Barrientos et al. 2017,
section 2.2) in the input schema, deterministic for a seed, with its report."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from pseo_das.config import load_config
from pseo_das.schemas.inputs import CipVintages
from pseo_das.tasks.inputs.cip_crosswalk import read_crosswalk
from pseo_das.tasks.inputs.ingest import read_inputs
from pseo_das.tasks.synthesis.cart import MIN_LEAF, donors
from pseo_das.tasks.synthesis.synthesizer import is_cart_synthetic, synthesize

SEED = bytes.fromhex("5e" * 32)


@pytest.fixture(scope="module")
def synthesized(synthetic_dir, tmp_path_factory):
    root = tmp_path_factory.mktemp("cart")
    first = synthesize(synthetic_dir, root / "a", SEED, load_config())
    again = synthesize(synthetic_dir, root / "b", SEED, load_config())
    other = synthesize(synthetic_dir, root / "c", bytes(32), load_config())
    return first, again, other


def test_synthetic_files_pass_the_projects_input_validation_with_cip_vintages(synthesized,
                                                                                synthetic_dir):
    cfg = load_config()
    crosswalk = read_crosswalk()
    vintages = CipVintages(frozenset(crosswalk.six_digit), crosswalk.codes_2020, cfg.cip.switch_year)
    result = synthesized[0]
    checked = read_inputs(result.out_dir, cfg.cells.first_cohort_year,
                          cfg.cells.last_earnings_year, vintages)
    source = read_inputs(synthetic_dir, cfg.cells.first_cohort_year, cfg.cells.last_earnings_year)
    assert len(checked.graduates) == len(source.graduates) == result.graduates
    assert len(checked.outcomes) == result.outcomes
    assert is_cart_synthetic(result.out_dir) and not is_cart_synthetic(synthetic_dir)


def test_the_synthesizer_is_deterministic_for_a_seed(synthesized):
    first, again, other = synthesized
    for name in ("graduates.parquet", "outcomes.parquet"):
        a, b, c = (pd.read_parquet(r.out_dir / name) for r in (first, again, other))
        pd.testing.assert_frame_equal(a, b)
        assert not a.equals(c)


def test_every_synthetic_value_comes_from_a_confidential_donor_and_margins_are_kept(
        synthesized, synthetic_dir):
    syn_g = pd.read_parquet(synthesized[0].out_dir / "graduates.parquet")
    syn_o = pd.read_parquet(synthesized[0].out_dir / "outcomes.parquet")
    conf_g = pd.read_parquet(synthetic_dir / "graduates.parquet")
    conf_o = pd.read_parquet(synthetic_dir / "outcomes.parquet")
    assert set(syn_o["earnings"].dropna()) <= set(conf_o["earnings"].dropna())
    assert set(zip(syn_g["institution"], syn_g["inst_state"])) <= \
        set(zip(conf_g["institution"], conf_g["inst_state"]))
    # no job <=> no state <=> no industry, as in the input contract
    assert (syn_o["earnings"].isna() == syn_o["emp_state"].isna()).all()
    assert (syn_o["earnings"].isna() == syn_o["industry"].isna()).all()
    for column in ("degree_level", "inst_state"):
        a = conf_g[column].astype(str).value_counts(normalize=True)
        b = syn_g[column].astype(str).value_counts(normalize=True)
        tvd = 0.5 * a.sub(b, fill_value=0).abs().sum()
        # 30,000 draws from the same marginal: the TVD is O(sqrt(levels / n)) ~ 0.01
        assert tvd < 0.03, (column, tvd)
    employed = lambda o, k: o.loc[o["years_after"] == k, "earnings"].notna().mean()
    for k in (1, 5, 10):
        assert abs(employed(conf_o, k) - employed(syn_o, k)) < 0.02


def test_the_report_says_there_is_no_formal_privacy_guarantee(synthesized):
    report = synthesized[0].report
    assert report.parent != synthesized[0].out_dir                  # never beside the files
    text = report.with_suffix(".md").read_text()
    assert "No formal privacy guarantee" in text and "disclosure review" in text
    assert "TVD" in text and "confidential" in text
    assert "<table>" in report.read_text()


def test_donors_come_from_the_leaf_of_each_record():
    train = np.array([3, 1, 3, 2, 1, 3])
    picked = donors(train, np.array([3, 3, 1, 2]), np.array([0.0, 0.99, 0.5, 0.2]))
    assert train[picked].tolist() == [3, 3, 1, 2]
    assert picked.tolist() == [0, 5, 4, 3]
    assert MIN_LEAF >= 5


def test_the_cli_refuses_an_existing_destination_and_bad_input(synthesized, tmp_path, capsys):
    from pseo_das.cli import main
    with pytest.raises(SystemExit) as stop:
        main(["synthesize", "--data", str(synthesized[0].out_dir), "--out",
              str(synthesized[0].out_dir)])
    assert stop.value.code == 2 and "already exists" in capsys.readouterr().err
    bad = tmp_path / "bad"
    bad.mkdir()
    pd.DataFrame({"person_id": [1, 1], "institution": ["1", "2"]}).to_csv(bad / "graduates.csv",
                                                                          index=False)
    (bad / "outcomes.csv").write_text("person_id,years_after,earnings,emp_state,industry\n")
    with pytest.raises(SystemExit) as stop:
        main(["synthesize", "--data", str(bad), "--out", str(tmp_path / "out")])
    assert stop.value.code == 2 and not (tmp_path / "out").exists()
    assert "nothing was written" in capsys.readouterr().err
