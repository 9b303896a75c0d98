"""The bounding study (`pseo-das evaluate --product bounding`) and the synthetic degree
histories it runs on: the generator's second-degree share is as asked (a binomial count),
the study's figures obey what the bound and the noise law imply."""
from __future__ import annotations

import json
import math

import pandas as pd
import pytest

from pseo_das.cli import main
from pseo_das.tasks.study.bounding_outputs import recommended_k
from pseo_das.tasks.study.bounding_study import expected_abs_noise
from rendered_html import markdown_problems

PERSONS = 20_000


def synth(out, *options: str) -> int:
    with pytest.raises(SystemExit) as stop:
        main(["synth", "--out", str(out), "--graduates", str(PERSONS), *options])
    return stop.value.code


@pytest.mark.parametrize("share", [0.1, 0.3])
def test_the_second_degree_share_is_as_configured(tmp_path, share):
    """Each of the n_c candidates holds a master's with chance p = share x n / n_c: the
    count is Binomial(n_c, p), mean share x n, variance n_c p (1 - p) <= share x n. Within
    4.5 standard deviations (a false alarm about once in 150,000 runs)."""
    assert synth(tmp_path, "--jobs", "--second-degree-share", str(share)) == 0
    graduates = pd.read_parquet(tmp_path / "graduates.parquet")
    per_person = graduates["person_id"].value_counts()
    assert len(per_person) == PERSONS and per_person.max() == 2
    second = graduates[graduates["person_id"].duplicated(keep="first")]
    assert (second["degree_level"] == "07").all()
    mean = share * PERSONS
    assert abs(int((per_person == 2).sum()) - mean) <= 4.5 * math.sqrt(mean)


def test_a_share_beyond_the_candidates_is_refused(tmp_path, capsys):
    assert synth(tmp_path, "--jobs", "--second-degree-share", "0.6") == 2
    assert "can hold a master's" in capsys.readouterr().err
    assert synth(tmp_path / "x", "--second-degree-share", "0.2") == 2
    assert "option of --jobs" in capsys.readouterr().err


@pytest.fixture(scope="module")
def study(tmp_path_factory):
    """The quick study on 20,000 persons, 20% of them with a second degree."""
    root = tmp_path_factory.mktemp("bounding")
    assert synth(root / "data", "--jobs", "--second-degree-share", "0.2") == 0
    with pytest.raises(SystemExit) as stop:
        main(["evaluate", "--product", "bounding", "--data", str(root / "data"),
              "--out", str(root / "study"), "--quick"])
    assert stop.value.code == 0
    out = root / "study"
    return (pd.read_csv(out / "bounding_accuracy.csv"), pd.read_csv(out / "bounding_by_k.csv"),
            json.loads((out / "bounding_study.json").read_text()), out)


def test_no_bias_once_k_reaches_the_most_degrees_of_a_person(study):
    measures, by_k, summary, _ = study
    assert summary["max_degrees"] == 2 and summary["persons_with_several"] > 0
    at_or_above = measures[measures["k"] >= summary["max_degrees"]]
    assert len(at_or_above) and (at_or_above["bias_part"] == 0).all()
    assert (by_k.loc[by_k["k"] >= 2, "dropped"] == 0).all()
    # below it the bound drops every second degree and the counts lose them
    assert by_k.loc[by_k["k"] == 1, "dropped"].item() == summary["persons_with_several"]
    below = measures[(measures["k"] == 1) & (measures["group"] == "all cells")
                     & measures["quantity"].isin(["graduates with earnings", "employed"])]
    assert len(below) == 2 and (below["bias_part"] > 0.05).all()
    assert (below["signed_bias"] < 0).all()


def test_the_noise_follows_the_law_at_epsilon_over_k(study):
    """Mean |noise| per histogram bin: 2q / (1 - q^2) with q = exp(-epsilon / k), within
    5 standard errors of the simulation, and so growing with k."""
    _, by_k, _, _ = study
    by_k = by_k.sort_values("k")
    for row in by_k.itertuples():
        assert row.law_mean_abs == pytest.approx(expected_abs_noise(row.epsilon, row.k))
        assert abs(row.measured_mean_abs - row.law_mean_abs) <= 5 * row.standard_error
    assert by_k["measured_mean_abs"].is_monotonic_increasing
    assert by_k["earnings_epsilon"].tolist() == ["1", "1/2", "1/3"]


def test_the_parts_bound_the_error_and_the_noise_grows_with_k(study):
    measures, _, _, _ = study
    defined = measures.dropna(subset=["relative_error"])
    parts = defined["bias_part"] + defined["noise_part"] + defined["binning_part"].fillna(0)
    assert (defined["relative_error"] <= parts + 1e-12).all()          # triangle inequality
    counts = measures[(measures["group"] == "all cells")
                      & measures["quantity"].isin(["graduates with earnings", "employed",
                                                   "not employed"])]
    for _, rows in counts.groupby("quantity"):
        assert rows.sort_values("k")["noise_part"].is_monotonic_increasing


def test_the_report_names_the_recommended_k(study):
    measures, _, summary, out = study
    best, means = recommended_k(measures, (25, 50, 75))
    assert summary["recommended_k"] == best == min(means, key=means.get)
    report = (out / "bounding_report.md").read_text()
    assert f"**Recommended: k = {best}**" in report
    assert markdown_problems(report, (out / "bounding_report.html").read_text()) == []


def test_the_outcomes_layout_is_refused(tmp_path, capsys):
    assert synth(tmp_path / "data") == 0
    with pytest.raises(SystemExit) as stop:
        main(["evaluate", "--product", "bounding", "--data", str(tmp_path / "data"),
              "--out", str(tmp_path / "study"), "--quick"])
    assert stop.value.code == 2
    assert "needs the jobs layout" in capsys.readouterr().err
    assert not (tmp_path / "study").exists()
