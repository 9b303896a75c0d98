"""The flows accuracy study's output folder: tidy CSV tables, figures (PNG, matplotlib's Agg
backend), flows_study.json and a short Markdown/HTML report. Privacy cost: none (synthetic data,
simulation summaries)."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd

from pseo_das.reports.render import render_markdown, to_html
from pseo_das.tasks import progress
from pseo_das.tasks.study.accuracy import ALL_CELLS
from pseo_das.tasks.study.flows_measures import QUANTITIES

# The target the default must meet, summed over the all-fields institution cells: |bias| of employed and of
# not employed at most 5% at every years-after, mean absolute error of a cell's
# not-employed count at most 3 graduates.
TARGET_BIAS, TARGET_NONEMPLOYED_MAE = 0.05, 3.0


def setting_label(frame: pd.DataFrame) -> pd.Series:
    """'candidate, total' as one label: 'appendix ..., noisy sum' or '..., measured total
    (10% of epsilon)'."""
    total = np.where(frame["total_share"] > 0,
                     "measured total (" + (frame["total_share"] * 100).round().astype(int).astype(str)
                     + "% of epsilon)", "noisy-sum total")
    return frame["candidate"] + ", " + total


def target_table(summary: pd.DataFrame) -> pd.DataFrame:
    """Per (setting, epsilon): bias of employed and not employed at each years-after, the
    mean absolute error of a cell's not-employed count (mean over years-after) and of its
    employed count, and whether the target is met. All cells (every stratum)."""
    cells = summary[summary["stratum"] == ALL_CELLS].assign(setting=lambda f: setting_label(f))
    keys = ["setting", "candidate", "total", "total_share", "epsilon"]
    wide = cells.pivot_table(index=keys, columns=["quantity", "years_after"],
                             values=["bias", "mean_abs_error"], observed=True)
    out = pd.DataFrame(index=wide.index)
    years = sorted(cells["years_after"].unique())
    for quantity, short in (("employed", "employed"), ("not employed", "nonemployed")):
        for y in years:
            out[f"bias_{short}_y{y}"] = wide[("bias", quantity, y)]
        out[f"mae_{short}"] = wide["mean_abs_error"][quantity][years].mean(axis=1)
    biases = out[[c for c in out.columns if c.startswith("bias_")]]
    out["meets_target"] = ((biases.abs() <= TARGET_BIAS).all(axis=1)
                           & (out["mae_nonemployed"] <= TARGET_NONEMPLOYED_MAE))
    return out.reset_index()


def recommended(targets: pd.DataFrame, epsilon: float) -> dict | None:
    """At `epsilon`, among the settings meeting the target, the one with the smallest mean
    absolute error of a cell's employed count (None when none meets it)."""
    at = targets[(targets["epsilon"] == epsilon) & targets["meets_target"]]
    if at.empty:
        return None
    return at.sort_values("mae_employed").iloc[0].to_dict()


def _pyplot():
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    return plt


def _style(plt, k: int, setting: str) -> dict:
    """A distinct colour per setting (tab20), dashed for the noisy-sum total."""
    return {"color": plt.get_cmap("tab20")(k % 20),
            "linestyle": "--" if setting.endswith("noisy-sum total") else "-"}


def _legend(fig, ax) -> None:
    ax.legend(fontsize=6, loc="upper left", bbox_to_anchor=(1.02, 1.0))
    fig.tight_layout()


def _by_epsilon_figure(plt, targets: pd.DataFrame, columns: list[str], titles: list[str],
                       ylabel: str, path: Path, band: float | None) -> None:
    fig, axes = plt.subplots(1, len(columns), figsize=(5 * len(columns) + 3.5, 4.2), sharey=True,
                             squeeze=False)
    for ax, column, title in zip(axes[0], columns, titles):
        for k, (setting, rows) in enumerate(targets.groupby("setting", sort=True)):
            rows = rows.sort_values("epsilon")
            ax.plot(rows["epsilon"], rows[column], marker="o", ms=3, label=setting,
                    **_style(plt, k, setting))
        if band is not None:
            ax.axhspan(-band, band, color="0.9", zorder=0)
        ax.set_title(title, fontsize=9)
        ax.set_xlabel("epsilon (total of the flows product)")
        ax.grid(alpha=0.3)
    axes[0][0].set_ylabel(ylabel)
    _legend(fig, axes[0][-1])
    fig.savefig(path, dpi=110, bbox_inches="tight")
    plt.close(fig)


def _by_quantity_figure(plt, summary: pd.DataFrame, epsilon: float, measure: str,
                        path: Path) -> None:
    at = summary[(summary["epsilon"] == epsilon) & (summary["stratum"] == ALL_CELLS)]
    at = at.assign(setting=setting_label(at)).groupby(["setting", "quantity"])[measure].mean()
    table = at.unstack("quantity")[list(QUANTITIES)]
    fig, ax = plt.subplots(figsize=(14, 4.5))
    width = 0.8 / len(table)
    for k, (setting, row) in enumerate(table.iterrows()):
        ax.bar(np.arange(len(QUANTITIES)) + k * width, row.to_numpy(), width, label=setting,
               color=_style(plt, k, setting)["color"])
    ax.set_xticks(np.arange(len(QUANTITIES)) + 0.4 - width / 2, QUANTITIES)
    ax.set_ylabel(measure.replace("_", " ") + f" (epsilon {epsilon:g}, mean over years after)")
    ax.grid(axis="y", alpha=0.3)
    _legend(fig, ax)
    fig.savefig(path, dpi=110, bbox_inches="tight")
    plt.close(fig)


def _by_stratum_figure(plt, summary: pd.DataFrame, epsilon: float, path: Path) -> None:
    at = summary[(summary["epsilon"] == epsilon) & (summary["quantity"] == "not employed")
                 & (summary["stratum"] != ALL_CELLS)]
    at = at.assign(setting=setting_label(at))
    order = list(dict.fromkeys(at["stratum"]))
    fig, ax = plt.subplots(figsize=(11.5, 4.2))
    for k, (setting, rows) in enumerate(at.groupby("setting", sort=True)):
        mae = rows.groupby("stratum", sort=False)["mean_abs_error"].mean().reindex(order)
        ax.plot(order, mae.to_numpy(), marker="o", ms=3, label=setting, **_style(plt, k, setting))
    ax.set_xlabel("cell size (true graduates)")
    ax.set_ylabel(f"MAE of not employed (epsilon {epsilon:g})")
    ax.grid(alpha=0.3)
    _legend(fig, ax)
    fig.savefig(path, dpi=110, bbox_inches="tight")
    plt.close(fig)


def write_figures(summary: pd.DataFrame, targets: pd.DataFrame, folder: Path,
                  epsilon: float) -> list[dict]:
    """The study's PNG figures in `folder`; returns their file names and captions."""
    plt = _pyplot()
    folder.mkdir(parents=True, exist_ok=True)
    years = sorted(summary["years_after"].unique())
    figures = [
        ("flows_bias_employed.png", "Bias of employed, summed over all-fields institution cells, by epsilon (grey: the +-5% target)"),
        ("flows_bias_nonemployed.png", "Bias of not employed, summed over all-fields institution cells, by epsilon (grey: the +-5% target)"),
        ("flows_mae_nonemployed.png", "Mean absolute error of a cell's not-employed count (mean over years after), by epsilon"),
        ("flows_relative_error_by_quantity.png", f"Relative error (sum |published - true| / sum true) by published quantity at epsilon {epsilon:g}"),
        ("flows_zero_share_by_quantity.png", f"Share of non-empty true flows published as 0, by quantity, at epsilon {epsilon:g}"),
        ("flows_mae_nonemployed_by_cell_size.png", f"Mean absolute error of not employed by cell size at epsilon {epsilon:g}"),
    ]
    names = [name for name, _ in figures]
    _by_epsilon_figure(plt, targets, [f"bias_employed_y{y}" for y in years],
                       [f"employed, {y} year(s) after" for y in years], "bias (relative)",
                       folder / names[0], TARGET_BIAS)
    _by_epsilon_figure(plt, targets, [f"bias_nonemployed_y{y}" for y in years],
                       [f"not employed, {y} year(s) after" for y in years], "bias (relative)",
                       folder / names[1], TARGET_BIAS)
    _by_epsilon_figure(plt, targets, ["mae_nonemployed"], ["not employed"],
                       "mean absolute error (graduates)", folder / names[2], None)
    _by_quantity_figure(plt, summary, epsilon, "relative_error", folder / names[3])
    _by_quantity_figure(plt, summary, epsilon, "zero_share", folder / names[4])
    _by_stratum_figure(plt, summary, epsilon, folder / names[5])
    return [{"file": f"figures/{name}", "caption": caption} for name, caption in figures]


def _records(frame: pd.DataFrame) -> list[dict]:
    return json.loads(frame.to_json(orient="records"))


def write_flows_study_outputs(out_dir: Path, measures: pd.DataFrame, summary: pd.DataFrame,
                              study: dict) -> dict:
    """flows_measures_by_draw.csv, flows_accuracy.csv, flows_targets.csv, flows_study.json, figures
    and flows_accuracy_report.md/.html in `out_dir`. Returns the recommendation and the
    target table's rows at the release epsilon."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    measures.to_csv(out_dir / "flows_measures_by_draw.csv", index=False)
    summary.to_csv(out_dir / "flows_accuracy.csv", index=False)
    targets = target_table(summary)
    targets.to_csv(out_dir / "flows_targets.csv", index=False)
    epsilon = study["release_epsilon"]
    if epsilon not in set(targets["epsilon"]):
        epsilon = float(targets["epsilon"].iloc[(targets["epsilon"] - epsilon).abs().argmin()])
    best = recommended(targets, epsilon)
    at_release = targets[targets["epsilon"] == epsilon].sort_values("setting")
    years = sorted(summary["years_after"].unique())
    quantities = (summary[(summary["epsilon"] == epsilon) & (summary["stratum"] == ALL_CELLS)]
                  .assign(setting=lambda f: setting_label(f))
                  .groupby(["setting", "quantity"], sort=True)[["bias", "relative_error", "zero_share"]]
                  .mean().reset_index())
    universe = (summary[(summary["epsilon"] == epsilon) & (summary["stratum"] == ALL_CELLS)
                        & (summary["quantity"] == "employed")]
                .assign(setting=lambda f: setting_label(f))
                .groupby(["setting"], sort=True)[["mean_diff_vs_grads_earn", "mae_vs_grads_earn",
                                                  "bias_vs_grads_earn", "true_diff_vs_grads_earn"]]
                .mean().reset_index())
    shipped = at_release[at_release["setting"] == study["shipped_default"]]
    study = {**study, "reported_epsilon": epsilon, "years": years, "recommended": best,
             "shipped": None if shipped.empty else {
                 "setting": study["shipped_default"],
                 "meets_target": bool(shipped["meets_target"].iloc[0]),
                 "wins": best is not None and best["setting"] == study["shipped_default"]}}
    (out_dir / "flows_study.json").write_text(json.dumps(study, indent=2, default=str) + "\n")
    context = {"study": study, "targets": _records(at_release), "years": years,
               "quantities": _records(quantities), "universe": _records(universe),
               "target_bias": TARGET_BIAS,
               "target_mae": TARGET_NONEMPLOYED_MAE,
               "figures": write_figures(summary, targets, out_dir / "figures", epsilon)}
    text = render_markdown("flows_accuracy_report.md.j2", context)
    (out_dir / "flows_accuracy_report.md").write_text(text)
    (out_dir / "flows_accuracy_report.html").write_text(to_html(text, "PSEO flows accuracy study"))
    progress(f"flows accuracy study written to {out_dir}")
    return {"recommended": best, "targets": _records(at_release), "epsilon": epsilon,
            "shipped": study["shipped"]}
