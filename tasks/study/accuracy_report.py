"""The accuracy study's figures (like seed 000's Figures 1-6, PNG via matplotlib's Agg
backend) and its report (Jinja -> Markdown -> HTML). Privacy cost: none (synthetic data)."""
from __future__ import annotations

from dataclasses import asdict
from pathlib import Path

import numpy as np
import pandas as pd

from pseo_das.reports.render import render_markdown, to_html
from pseo_das.tasks.study.accuracy import ALL_CELLS, PUBLISHABLE, STRATUM_ORDER
from pseo_das.tasks.study.accuracy_findings import Finding
from pseo_das.tasks.study.study_bins import EVEN, LOG_NORMAL
from pseo_das.tasks.study.study_mechanisms import SMOOTH_SENSITIVITY, SMOOTH_SENSITIVITY_UNSPLIT

# The paper's line styles: Log-Normal solid blue, Even dashed red, smooth sensitivity
# dash-dot green; the unsplit smooth-sensitivity comparator dotted green.
STYLES = {
    LOG_NORMAL: dict(color="tab:blue", linestyle="-", label="Log-Normal"),
    EVEN: dict(color="tab:red", linestyle="--", label="Even"),
    SMOOTH_SENSITIVITY: dict(color="tab:green", linestyle="-.", label="Smooth sensitivity"),
    SMOOTH_SENSITIVITY_UNSPLIT: dict(color="tab:green", linestyle=":",
                                     label="Smooth sensitivity, eps per percentile"),
}
HISTOGRAM_METHODS = (LOG_NORMAL, EVEN)
FLOOR = -1.0  # relative accuracy axes stop here; lower values are drawn under it, marked
FLOOR_STEP = 0.03   # one level per method under the floor


def _pyplot():
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    return plt


def _panel_bins(bin_counts: list[int]) -> list[int]:
    """Up to four bin counts for the panels: the paper's 10, 15, 20, 25 when present."""
    wanted = [k for k in (10, 15, 20, 25) if k in bin_counts]
    return wanted or bin_counts[:4]


def _production_bins(bin_counts: list[int]) -> int:
    return min(bin_counts, key=lambda k: abs(k - 20))


def _nearest(values: list[float], targets: tuple[float, ...]) -> list[float]:
    picked = []
    for t in targets:
        v = min(values, key=lambda x: abs(x - t))
        if v not in picked:
            picked.append(v)
    return picked


def _grid(plt, n: int, ncols: int, sharey: bool = True):
    nrows = (n + ncols - 1) // ncols
    fig, axes = plt.subplots(nrows, ncols, figsize=(4.2 * ncols, 3.3 * nrows), squeeze=False,
                             sharey=sharey)
    for ax in axes.flat[n:]:
        ax.set_visible(False)
    return fig, list(axes.flat[:n])


def _line(ax, x, y, method, floor=None):
    """One method's line. With `floor`, values below it are drawn with a down-triangle on
    a level of their own just under the floor (one per method, so that no line hides
    another there)."""
    y = pd.Series(y, dtype=float).to_numpy()
    style = STYLES[method]
    if floor is not None:
        level = floor - FLOOR_STEP * (1 + list(STYLES).index(method))
        below = y < floor
        y = np.where(below, level, y)
        if below.any():
            ax.plot(np.asarray(list(x), dtype=float)[below], y[below], linestyle="none",
                    marker="v", markersize=4, color=style["color"])
    ax.plot(list(x), y, **style)


def _finish(fig, axes, path: Path, ylabel: str, xlabel: str, relative: bool) -> None:
    for ax in axes:
        ax.grid(alpha=0.3)
        ax.set_xlabel(xlabel)
        if relative and ax.get_ylim()[0] < FLOOR:
            ax.set_ylim(FLOOR - FLOOR_STEP * (len(STYLES) + 1), 1.02)
    axes[0].set_ylabel(ylabel + (f" (\u25bc: below {FLOOR:g})" if relative else ""))
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=len(labels), frameon=False)
    fig.tight_layout(rect=(0, 0.07, 1, 1))
    fig.savefig(path, dpi=110)
    fig.clf()


def _by_method_figure(plt, accuracy: pd.DataFrame, percentile: int, path: Path,
                      measure: str = "mean_relative_accuracy", stratum: str = ALL_CELLS) -> None:
    rows = accuracy[(accuracy["percentile"] == percentile) & (accuracy["stratum"] == stratum)]
    bin_counts = sorted(int(b) for b in rows["bins"].dropna().unique())
    panels = _panel_bins(bin_counts)
    fig, axes = _grid(plt, len(panels), 2)
    for ax, k in zip(axes, panels):
        for method in STYLES:
            sel = rows[(rows["method"] == method) & ((rows["bins"] == k) | rows["bins"].isna())]
            if len(sel):
                _line(ax, sel["epsilon"], sel[measure], method, FLOOR)
        ax.set_title(f"{k} bins")
    _finish(fig, axes, path, "relative accuracy", "epsilon", relative=True)
    plt.close(fig)


def _by_cell_size_figure(plt, accuracy: pd.DataFrame, path: Path, measure: str) -> None:
    k = _production_bins(sorted(int(b) for b in accuracy["bins"].dropna().unique()))
    rows = accuracy[(accuracy["percentile"] == 50)
                    & ((accuracy["bins"] == k) | accuracy["bins"].isna())]
    strata = [s for s in STRATUM_ORDER if s in set(rows["stratum"])]
    fig, axes = _grid(plt, len(strata), 3)
    for ax, stratum in zip(axes, strata):
        sel = rows[rows["stratum"] == stratum]
        for method in STYLES:
            m = sel[sel["method"] == method]
            if len(m):
                _line(ax, m["epsilon"], m[measure], method, FLOOR)
        ax.set_title(f"{stratum} ({int(sel['cells'].iloc[0]):,} cells)")
    _finish(fig, axes, path, "relative accuracy", "epsilon", relative=True)
    plt.close(fig)


def _by_bins_figure(plt, accuracy: pd.DataFrame, path: Path) -> None:
    """Top row: all cells; bottom row: cells of 30 and over."""
    rows = accuracy[accuracy["percentile"] == 50]
    epsilons = _nearest(sorted(rows["epsilon"].unique()), (0.5, 1.0, 2.0, 3.0))
    strata = [s for s in (ALL_CELLS, PUBLISHABLE) if s in set(rows["stratum"])]
    panels = [(s, e) for s in strata for e in epsilons]
    fig, axes = _grid(plt, len(panels), len(epsilons), sharey=False)
    for ax, (stratum, eps) in zip(axes, panels):
        sel = rows[(rows["epsilon"] == eps) & (rows["stratum"] == stratum)]
        hist = sel[sel["method"].isin(HISTOGRAM_METHODS)]["mean_relative_accuracy"]
        # Each panel is scaled to the histogram methods, so a 2-point change shows; smooth
        # sensitivity below the axis is written in the panel instead of drawn.
        low = float(hist.min()) - 0.02
        for method in HISTOGRAM_METHODS:
            m = sel[sel["method"] == method].sort_values("bins")
            _line(ax, m["bins"], m["mean_relative_accuracy"], method)
        below = []
        for method in (SMOOTH_SENSITIVITY, SMOOTH_SENSITIVITY_UNSPLIT):
            m = sel[sel["method"] == method]
            if len(m):
                value = float(m["mean_relative_accuracy"].iloc[0])
                bins = sorted(sel["bins"].dropna().unique())
                if value >= low:
                    _line(ax, bins, [value] * len(bins), method)
                else:
                    ax.plot([], [], **STYLES[method])  # keeps the legend entry
                    below.append(f"{'split' if method == SMOOTH_SENSITIVITY else 'unsplit'} SS: {value:.2f}")
        if below:
            ax.text(0.02, 0.03, "below the axis: " + "; ".join(below), transform=ax.transAxes,
                    fontsize=7, color="tab:green")
        ax.set_ylim(low - 0.005, max(float(hist.max()) + 0.02, low + 0.05))
        ax.set_title(f"{stratum}, epsilon {eps:g}")
    _finish(fig, axes, path, "relative accuracy", "number of bins", relative=True)
    plt.close(fig)


def _l1_figure(plt, l1: pd.DataFrame, path: Path) -> None:
    rows = l1[(l1["stratum"] == ALL_CELLS) & l1["method"].isin(HISTOGRAM_METHODS)]
    panels = _panel_bins(sorted(int(b) for b in rows["bins"].dropna().unique()))
    fig, axes = _grid(plt, len(panels), 2)
    for ax, k in zip(axes, panels):
        for method in HISTOGRAM_METHODS:
            sel = rows[(rows["method"] == method) & (rows["bins"] == k)]
            _line(ax, sel["epsilon"], sel["mean_l1_error_sum"], method)
        ax.set_title(f"{k} bins")
        ax.set_ylim(bottom=0)
    _finish(fig, axes, path, "sum of L1 errors (dollars)", "epsilon", relative=False)
    plt.close(fig)


FIGURES = (
    ("figure1_p50_by_method.png", "Figure 1. Mean relative accuracy by method, 50th percentile, all cells"),
    ("figure2_p50_by_cell_size.png", "Figure 2. Mean relative accuracy by cell size (true count), 50th percentile, 20 bins"),
    ("figure3_p50_by_bin_count.png", "Figure 3. Mean relative accuracy by bin count, 50th percentile: all cells (top), cells of 30 and over (bottom)"),
    ("figure4_p25_by_method.png", "Figure 4. Mean relative accuracy by method, 25th percentile, all cells"),
    ("figure5_p75_by_method.png", "Figure 5. Mean relative accuracy by method, 75th percentile, all cells"),
    ("figure6_l1_by_method.png", "Figure 6. Mean sum of the three L1 errors (25th, 50th, 75th), histogram methods, all cells"),
    ("figure7_p50_median_by_cell_size.png", "Figure 7 (not in the paper). Median relative accuracy by cell size, 50th percentile, 20 bins"),
)


def write_figures(accuracy: pd.DataFrame, l1: pd.DataFrame, folder: Path) -> list[dict]:
    """The seven PNG figures in `folder`; returns their file names and captions."""
    plt = _pyplot()
    folder.mkdir(parents=True, exist_ok=True)
    names = [f for f, _ in FIGURES]
    _by_method_figure(plt, accuracy, 50, folder / names[0])
    _by_cell_size_figure(plt, accuracy, folder / names[1], "mean_relative_accuracy")
    _by_bins_figure(plt, accuracy, folder / names[2])
    _by_method_figure(plt, accuracy, 25, folder / names[3])
    _by_method_figure(plt, accuracy, 75, folder / names[4])
    _l1_figure(plt, l1, folder / names[5])
    _by_cell_size_figure(plt, accuracy, folder / names[6], "median_relative_accuracy")
    return [{"file": f"{folder.name}/{f}", "caption": c} for f, c in FIGURES]


def _headline_table(accuracy: pd.DataFrame) -> list[dict]:
    """Mean and median relative accuracy at the production bin count and a few epsilons."""
    k = _production_bins(sorted(int(b) for b in accuracy["bins"].dropna().unique()))
    rows = accuracy[(accuracy["percentile"] == 50) & accuracy["stratum"].isin([ALL_CELLS, PUBLISHABLE])
                    & ((accuracy["bins"] == k) | accuracy["bins"].isna())]
    epsilons = _nearest(sorted(rows["epsilon"].unique()), (0.5, 1.0, 2.0, 3.0))
    out = []
    for method in STYLES:
        for stratum in (PUBLISHABLE, ALL_CELLS):
            sel = rows[(rows["method"] == method) & (rows["stratum"] == stratum)].set_index("epsilon")
            if len(sel):
                out.append({"stratum": stratum, "method": STYLES[method]["label"],
                            "values": [(f"{sel.loc[e, 'mean_relative_accuracy']:.3f}",
                                        f"{sel.loc[e, 'median_relative_accuracy']:.3f}")
                                       for e in epsilons]})
    return [{"epsilons": epsilons, "bins": k, "rows": out}]


def write_accuracy_report(out_dir: Path, accuracy: pd.DataFrame, l1: pd.DataFrame,
                          findings: list[Finding], study: dict) -> Path:
    """Figures, then accuracy_report.md and accuracy_report.html in `out_dir`."""
    figures = write_figures(accuracy, l1, out_dir / "figures")
    context = {"study": study, "figures": figures,
               "findings": [asdict(f) for f in findings],
               "headline": _headline_table(accuracy)[0]}
    text = render_markdown("accuracy_report.md.j2", context)
    (out_dir / "accuracy_report.md").write_text(text)
    html = out_dir / "accuracy_report.html"
    html.write_text(to_html(text, "PSEO accuracy study"))
    return html
