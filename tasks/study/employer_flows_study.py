"""The employer-protection accuracy study (`pseo-das evaluate --product flows --mechanisms
...`): the measured 2-digit CIP flows of synthetic data with employers, noised by the
geometric mechanism and by Log-Laplace, Smooth Gamma and Smooth Laplace at the grid of
Haney et al. 2017 (alpha 0.01 to 0.2, epsilon 0.25 to 4), and the error of each flow by
its size (true graduates) and by its employer concentration (the share of its graduates at
its largest establishment, x_v / n).

The truth and x_v come from the release's own streaming count (tasks/inputs/true_counts.py),
the noise from simulation streams of the study seed through the mechanism layer's samplers
(never a release stream). The raw measured flows are compared (before the correction,
which treats every mechanism's values alike): mean error (bias), mean absolute error and
relative error (mean absolute error over the mean true count), per stratum; the same for
the employer-side table (every employed graduate by state x sector x years after: only
establishment attributes, the strong notion; x_v over all graduates); infeasible
(mechanism, alpha, epsilon) settings are listed as such. Synthetic data only: the outputs
hold true counts. Privacy cost: none (a simulation; nothing is released).
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from pseo_das.config import ReleaseConfig, load_config
from pseo_das.tasks import progress
from pseo_das.tasks.codes.destinations import NONEMPLOYED
from pseo_das.tasks.inputs.cpi import find_cpi, read_cpi
from pseo_das.tasks.inputs.reference_inputs import default_reference_dir
from pseo_das.tasks.inputs.true_counts import read_counts
from pseo_das.tasks.privacy.establishment import (EmployerProtection, FlowsMechanism,
                                                  InfeasibleParameters)
from pseo_das.tasks.privacy.employer_side import employer_protected_values, whole_graduates
from pseo_das.tasks.study.accuracy_grid import study_seed
from pseo_das.tasks.study.simulation_noise import exact_geometric_noise, simulation_generator

ALPHAS = (0.01, 0.05, 0.1, 0.15, 0.2)            # the seed's grid
EPSILONS = (0.25, 0.5, 1.0, 2.0, 4.0)
SMOOTH_LAPLACE_DELTA = 1e-3
SIZE_STRATA = ((0, 0, "0"), (1, 4, "1-4"), (5, 9, "5-9"), (10, 49, "10-49"),
               (50, np.inf, "50+"))
# Employer concentration of a flow with at least 5 graduates: x_v / n.
CONCENTRATION_STRATA = ((0.0, 0.5, "largest employer < 50%"),  # employed flows
                        (0.5, 0.9999, "largest employer 50-99%"),
                        (0.9999, 1.0, "one employer (100%)"))
MIN_FLOW_FOR_CONCENTRATION = 5
# The employer-side table: every employed graduate by state x sector x years after (only
# establishment attributes: the strong notion, parallel across its cells for employers).
TABLE_STRATUM = "state x sector, all graduates"


@dataclass(frozen=True)
class EmployerStudySetting:
    mechanism: FlowsMechanism
    alpha: float | None          # None for the geometric mechanism
    epsilon: float

    @property
    def protection(self) -> EmployerProtection | None:
        if self.mechanism is FlowsMechanism.GEOMETRIC:
            return None
        delta = SMOOTH_LAPLACE_DELTA if self.mechanism is FlowsMechanism.SMOOTH_LAPLACE else 0.0
        return EmployerProtection(self.mechanism, self.alpha, self.epsilon, delta)


def study_settings(mechanisms: list[FlowsMechanism], alphas=ALPHAS, epsilons=EPSILONS
                   ) -> list[EmployerStudySetting]:
    out = []
    for epsilon in epsilons:
        for mechanism in mechanisms:
            if mechanism is FlowsMechanism.GEOMETRIC:
                out.append(EmployerStudySetting(mechanism, None, epsilon))
            else:
                out += [EmployerStudySetting(mechanism, alpha, epsilon) for alpha in alphas]
    return out


def strata(truth: np.ndarray, largest: np.ndarray) -> list[tuple[str, str, np.ndarray]]:
    """(kind, label, boolean mask over the flows) of every size and concentration stratum."""
    out = [("size", label, (truth >= lo) & (truth <= hi)) for lo, hi, label in SIZE_STRATA]
    share = np.divide(largest, truth, out=np.zeros(truth.shape), where=truth > 0)
    big = truth >= MIN_FLOW_FOR_CONCENTRATION
    big[:, NONEMPLOYED] = False   # employed flows only: the share at their largest employer
    out += [("concentration", label, big & (share > lo) & (share <= hi))
            for lo, hi, label in CONCENTRATION_STRATA]
    return out


def setting_values(setting: EmployerStudySetting, truth: np.ndarray, largest: np.ndarray,
                   seed: bytes, stream: str) -> np.ndarray:
    """One simulated measurement of `truth` (whole graduates, as a release stores it)."""
    if setting.protection is None:
        return truth + exact_geometric_noise(seed, stream, setting.epsilon, truth.shape)
    return whole_graduates(employer_protected_values(simulation_generator(seed, stream), truth,
                                                     largest, setting.protection))


def evaluate(counts, cfg: ReleaseConfig, settings: list[EmployerStudySetting], draws: int,
             seed: bytes) -> pd.DataFrame:
    """One row per (setting, draw, years after, stratum): flows, true mean, bias, MAE,
    relative error; infeasible settings get one row with the reason."""
    rows = []
    tables = []
    for k in cfg.cells.years_after:
        _, truth = counts.flows("2", k, cfg.cells.last_earnings_year)
        largest = counts.largest_at_one_employer("2", k, cfg.cells.last_earnings_year)
        table = counts.employer_side_table("2", k, cfg.cells.last_earnings_year)
        tables.append((k, truth, largest, strata(truth, largest), table))
    started = time.time()
    for n, setting in enumerate(settings):
        base = {"mechanism": setting.mechanism.value, "alpha": setting.alpha,
                "epsilon": setting.epsilon,
                "delta": setting.protection.delta if setting.protection else 0.0}
        try:
            if setting.protection is not None:
                setting.protection.check()
        except InfeasibleParameters as exc:
            rows.append({**base, "feasible": False, "reason": str(exc)})
            continue
        for draw in range(draws):
            for k, truth, largest, groups, (table, table_largest) in tables:
                stream = (f"{setting.mechanism.value}/alpha={setting.alpha!r}/"
                          f"epsilon={setting.epsilon!r}/draw={draw}/y{k}")
                error = (setting_values(setting, truth, largest, seed, stream) - truth
                         ).astype(np.float64)
                table_error = (setting_values(setting, table, table_largest, seed,
                                              f"{stream}/employer-table") - table
                               ).astype(np.float64)
                pieces = [(error, truth, kind, label, mask) for kind, label, mask in groups]
                pieces.append((table_error, table, "employer table", TABLE_STRATUM,
                               np.ones(table.shape, bool)))
                for error_of, truth_of, kind, label, mask in pieces:
                    flows = int(mask.sum())
                    if not flows:
                        continue
                    e, t = error_of[mask], truth_of[mask]
                    mae = float(np.abs(e).mean())
                    rows.append({**base, "feasible": True, "reason": "", "draw": draw,
                                 "years_after": k, "stratum_kind": kind, "stratum": label,
                                 "flows": flows, "true_mean": float(t.mean()),
                                 "bias": float(e.mean()), "mean_abs_error": mae,
                                 "relative_error": mae / float(t.mean()) if t.mean() else np.nan})
        progress(f"employer study: {n + 1}/{len(settings)} settings "
                 f"({time.time() - started:.0f} s)")
    return pd.DataFrame(rows)


def summarise(measures: pd.DataFrame) -> pd.DataFrame:
    """Per (mechanism, alpha, epsilon, stratum): mean over draws and years after, flows
    weighted."""
    ok = measures[measures["feasible"]].copy()
    ok["alpha"] = ok["alpha"].fillna(-1)
    for column in ("bias", "mean_abs_error", "true_mean"):
        ok[f"w_{column}"] = ok[column] * ok["flows"]
    keys = ["mechanism", "alpha", "epsilon", "delta", "stratum_kind", "stratum"]
    grouped = ok.groupby(keys, sort=False)[["flows", "w_bias", "w_mean_abs_error",
                                            "w_true_mean"]].sum()
    out = pd.DataFrame({"flows": grouped["flows"],
                        "true_mean": grouped["w_true_mean"] / grouped["flows"],
                        "bias": grouped["w_bias"] / grouped["flows"],
                        "mean_abs_error": grouped["w_mean_abs_error"] / grouped["flows"]})
    out["relative_error"] = out["mean_abs_error"] / out["true_mean"].where(out["true_mean"] > 0)
    out = out.reset_index()
    out["alpha"] = out["alpha"].where(out["alpha"] >= 0)
    return out


def employer_flows_study(data_dir: Path, out_dir: Path, mechanisms: list[str],
                         seed_hex: str, draws: int = 1, alphas: list[float] | None = None,
                         epsilons: list[float] | None = None) -> dict:
    """Run the study on synthetic data with employer_id; write employer_flows_accuracy.csv
    (summary), employer_flows_measures_by_draw.csv, employer_flows_infeasible.csv and
    employer_flows_accuracy.md to `out_dir`. Returns the summary's headline figures."""
    started = time.time()
    chosen = [FlowsMechanism(m) for m in mechanisms]
    cfg = load_config()
    # counting x_v needs an employer-protecting mechanism in the counting rules
    cfg = cfg.model_copy(update={"flows": cfg.flows.model_copy(update={
        "mechanism": FlowsMechanism.SMOOTH_GAMMA.value})})
    counts = read_counts(Path(data_dir), cfg, None, read_cpi(find_cpi(default_reference_dir())))
    settings = study_settings(chosen, tuple(alphas or ALPHAS), tuple(epsilons or EPSILONS))
    measures = evaluate(counts, cfg, settings, draws, study_seed(seed_hex))
    summary = summarise(measures)
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    summary.to_csv(out_dir / "employer_flows_accuracy.csv", index=False)
    measures[measures["feasible"]].drop(columns=["feasible", "reason"]).to_csv(
        out_dir / "employer_flows_measures_by_draw.csv", index=False)
    infeasible = measures.loc[~measures["feasible"], ["mechanism", "alpha", "epsilon", "delta",
                                                     "reason"]]
    infeasible.to_csv(out_dir / "employer_flows_infeasible.csv", index=False)
    (out_dir / "employer_flows_accuracy.md").write_text(
        report_text(summary, infeasible, data_dir, draws, seed_hex, time.time() - started))
    return {"settings": len(settings), "infeasible": len(infeasible),
            "seconds": time.time() - started}


def report_text(summary: pd.DataFrame, infeasible: pd.DataFrame, data_dir: Path, draws: int,
                seed_hex: str, seconds: float) -> str:
    """A short Markdown report: mean absolute error by size and by concentration, each
    mechanism next to the geometric one."""
    def table(kind: str) -> str:
        part = summary[summary["stratum_kind"] == kind]
        labels = list(dict.fromkeys(part["stratum"]))
        lines = ["| mechanism | alpha | epsilon | " + " | ".join(labels) + " |",
                 "|---|---|---|" + "---|" * len(labels)]
        for (m, a, e), g in part.groupby(["mechanism", "alpha", "epsilon"], sort=False,
                                         dropna=False):
            by = dict(zip(g["stratum"], g["mean_abs_error"]))
            lines.append(f"| {m} | {'-' if pd.isna(a) else f'{a:g}'} | {e:g} | "
                         + " | ".join(f"{by[s]:.2f}" if s in by else "-" for s in labels) + " |")
        return "\n".join(lines)
    return (f"# Employer-protection accuracy of the employment flows\n\n"
            f"Synthetic data `{data_dir}`, {draws} draw(s) per setting, seed `{seed_hex[:16]}...`, "
            f"{seconds:.0f} s. Mean absolute error of a measured 2-digit CIP flow (graduates), "
            "before the correction, over every years-after.\n\n"
            f"## By flow size (true graduates)\n\n{table('size')}\n\n"
            f"## By employer concentration (employed flows of {MIN_FLOW_FOR_CONCENTRATION} or "
            f"more graduates; share at the largest establishment)\n\n{table('concentration')}\n\n"
            "## Employer-side table (state x sector x years after, strong notion)\n\n"
            "Every employed graduate by state x sector: mean absolute error per cell "
            f"(graduates).\n\n{table('employer table')}\n\n"
            f"## Infeasible settings\n\n{len(infeasible)} (mechanism, alpha, epsilon) settings "
            "cannot give the guarantee (employer_flows_infeasible.csv).\n")
