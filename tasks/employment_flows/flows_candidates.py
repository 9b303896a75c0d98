"""Candidate post-processings of the noisy employment flows: each turns an
origin cell's noisy flows (cells x destinations, int64, possibly negative) into
non-negative integer flows whose row sums are exactly max(target total, 0).
Privacy cost of every function here: none. They read only noisy flows, a noisy target
total (the noisy sum of the flows, or a separately measured noisy count, whose epsilon is
spent where it is measured) and the A.3.2 weights (public J2J and QCEW files and INDFLOW,
itself a sum of noisy flows); their random draws, if any, come from a seeded stream of
`tasks/privacy/post_processing.py` (`post_processing_exponentials`) passed as `exponentials`.

The candidates:

* `appendix_correction`: technical appendix A.3.1-A.3.2 (negative flows to 0, a cell
  with a non-positive total to 0, the excess removed one unit at a time by weighted
  draws among positive flows), simulated with competing exponential clocks.
* the same with another weight of the non-employed destination:
  `with_nonemployed_weight` rescales the last column of the log weights (the appendix,
  footnote 9, leaves that weight arbitrary). The value is a public constant calibrated on
  synthetic data by the flows accuracy study (no confidential data, no epsilon).
* `thresholded_correction`: flows under a noise threshold (`noise_threshold`: a true
  zero survives with probability at most alpha) set to 0 before the total is matched
  (`employed_threshold`: thresholds on the employed destinations only).
* `simplex_projection`: the Euclidean projection of the noisy row onto the scaled simplex
  {x >= 0, sum x = total}, rounded to integers by largest remainder, ties (and the units
  of a cell with no positive flow) going to the destinations the A.3.2 prior finds more
  likely.

Every candidate accepts any target total, so each can be paired with a measured total.
Removal (`remove_units`) is the appendix's weighted draw; a deficit (a measured total
above the kept flows) is added in proportion to the kept flows (`add_in_proportion`).
"""
from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import pandas as pd

Exponentials = Callable[[int], np.ndarray]   # n -> n standard exponential variates


def with_nonemployed_weight(log_w: np.ndarray, nonemployed_weight: float) -> np.ndarray:
    """Log weights with the non-employed destination (last column) set to
    `nonemployed_weight` times the geometric mean of the cell's employed-destination
    weights, as `flows_correction.log_weights` builds it. Privacy cost: none."""
    employed = log_w[:, :-1]
    nonemployed = math.log(nonemployed_weight) + employed.mean(axis=1, keepdims=True)
    return np.hstack([employed, nonemployed])


def prior_shares(log_w: np.ndarray) -> np.ndarray:
    """The A.3.2 prior as shares per row: destination d is likely in proportion to
    1 / w_d = J2J x QCEW x INDFLOW (the removal weight's inverse). Privacy cost: none."""
    logits = -(log_w - log_w.min(axis=1, keepdims=True))
    shares = np.exp(logits - logits.max(axis=1, keepdims=True))
    return shares / shares.sum(axis=1, keepdims=True)


def noise_threshold(epsilon: float, alpha: float) -> int:
    """Smallest t >= 1 with P(eta >= t) <= alpha for the two-sided geometric noise eta at
    `epsilon` (P(eta >= t) = q^t / (1 + q), q = exp(-epsilon)): a flow whose true value is
    0 reaches t with probability at most alpha. Privacy cost: none (a public constant)."""
    q = math.exp(-epsilon)
    return max(1, math.ceil(math.log(alpha * (1 + q)) / math.log(q) - 1e-12))


def remove_units(flows: np.ndarray, excess: np.ndarray, log_w: np.ndarray,
                 exponentials: Exponentials) -> np.ndarray:
    """Remove excess[i] units from row i of the non-negative `flows`, one unit at a time,
    each from a still-positive flow drawn with probability proportional to exp(log_w)
    (A.3.2), simulated exactly by competing exponential clocks: the units of flow (i, d)
    get the arrival times of a Poisson process of rate w_d, and the excess[i] earliest
    units of row i go. Requires excess[i] <= flows[i].sum().

    `exponentials(n)` gives n standard exponential variates, one per unit that could be
    removed (at most excess[i] per flow), in (cell, destination, unit) order. The k-th
    earliest clock is found per cell by partial selection within the cell's own units
    (no sort across cells). Returns the flows after removal. Privacy cost: none.
    """
    flows = np.array(flows, dtype=np.int64)
    excess = np.asarray(excess, dtype=np.int64)
    rows, cols = np.nonzero((flows > 0) & (excess[:, None] > 0))
    units = np.minimum(flows[rows, cols], excess[rows])          # at most F per flow matter
    entry = np.repeat(np.arange(len(rows)), units)
    waits = pd.Series(exponentials(len(entry))).groupby(entry, sort=False).cumsum().to_numpy()
    clock = np.log(waits) - log_w[rows, cols][entry]              # log(waiting time / w)
    # units are grouped by cell (np.nonzero is row-major): cell r owns clock[start:end]
    cell_rows, first_flow = np.unique(rows, return_index=True)
    starts = np.append(np.cumsum(np.append(0, units))[first_flow], len(clock))
    removed_unit = np.zeros(len(clock), dtype=bool)
    for r, start, end in zip(cell_rows.tolist(), starts[:-1].tolist(), starts[1:].tolist()):
        k = int(excess[r])
        segment = clock[start:end]
        if k >= end - start:
            removed_unit[start:end] = True
        else:
            removed_unit[start:end] = segment <= np.partition(segment, k - 1)[k - 1]
    flows[rows, cols] -= np.bincount(entry[removed_unit], minlength=len(rows))
    return flows


def largest_remainder(shares: np.ndarray, totals: np.ndarray, log_w: np.ndarray) -> np.ndarray:
    """Integers per row summing exactly to totals[i] (>= 0), proportional to `shares`
    (non-negative rows with a positive sum): the floors of the quotas, then one more unit
    to each of the largest remainders; equal remainders go first to the destinations the
    A.3.2 prior finds more likely (smaller log_w), then to the lower index. Deterministic.
    Privacy cost: none."""
    shares = np.asarray(shares, dtype=np.float64)
    totals = np.asarray(totals, dtype=np.int64)
    quota = shares / shares.sum(axis=1, keepdims=True) * totals[:, None]
    base = np.floor(quota).astype(np.int64)
    remainder = np.round(np.where(shares > 0, quota - base, -1.0), 9)
    left = totals - base.sum(axis=1)
    order = np.lexsort((log_w, -remainder), axis=-1)             # per row
    extra = np.zeros_like(base)
    np.put_along_axis(extra, order, (np.arange(shares.shape[1]) < left[:, None]).astype(np.int64),
                      axis=1)
    return base + extra


def add_in_proportion(flows: np.ndarray, deficit: np.ndarray, log_w: np.ndarray) -> np.ndarray:
    """Add deficit[i] units to row i of the non-negative `flows`, in proportion to the
    row's flows (largest remainder, ties by the prior); a row without any positive flow
    gets its units in proportion to the A.3.2 prior. Deterministic. Privacy cost: none."""
    flows = np.array(flows, dtype=np.int64)
    short = np.flatnonzero(deficit > 0)
    if len(short):
        base = flows[short].astype(np.float64)
        empty = base.sum(axis=1) == 0
        base[empty] = prior_shares(log_w[short][empty])
        flows[short] += largest_remainder(base, deficit[short], log_w[short])
    return flows


def match_total(kept: np.ndarray, total: np.ndarray, log_w: np.ndarray,
                exponentials: Exponentials) -> np.ndarray:
    """Non-negative flows `kept` made to sum to max(total, 0) per row: a row with a
    non-positive total is 0; an excess is removed by the appendix's weighted draws
    (`remove_units`); a deficit is added in proportion to the kept flows
    (`add_in_proportion`). A zero total removes the cell's units by the draws too, so
    the stream is consumed as `flows_correction.correct_values` consumes it. Privacy cost:
    none."""
    total = np.asarray(total, dtype=np.int64)
    kept = np.where(total[:, None] >= 0, kept, 0)   # a zero total: every unit drawn out
    gap = kept.sum(axis=1) - np.maximum(total, 0)
    matched = remove_units(kept, np.maximum(gap, 0), log_w, exponentials)
    return add_in_proportion(matched, np.maximum(-gap, 0), log_w)


def appendix_correction(noisy: np.ndarray, total: np.ndarray, log_w: np.ndarray,
                        exponentials: Exponentials) -> np.ndarray:
    """Technical appendix A.3.1-A.3.2: negative flows set to 0, a cell whose total is not
    positive set to 0, then the excess over `total` removed by weighted draws (weights
    exp(log_w)); with `total` = the noisy row sum (the appendix's own total) there is
    never a deficit. With a measured total above the clipped sum, the deficit is added in
    proportion to the flows. Privacy cost: none (post-processing; the draws come from
    `exponentials`, a seeded post-processing stream)."""
    return match_total(np.maximum(noisy, 0), total, log_w, exponentials)


def thresholded_correction(noisy: np.ndarray, total: np.ndarray, log_w: np.ndarray,
                           threshold: int | np.ndarray, exponentials: Exponentials) -> np.ndarray:
    """Sparsity-aware correction: flows under `threshold` (an int, or one per destination;
    from `noise_threshold`: a true zero passes it with probability at most alpha) set to 0,
    then the total matched as in `match_total` (weighted removal of an excess, proportional
    addition of a deficit). A threshold of 1 for a destination only clips it at 0 (the
    non-employed destination, rarely empty, is best left unthresholded).
    Privacy cost: none (post-processing; public thresholds; seeded draws)."""
    kept = np.where(noisy >= np.asarray(threshold)[None], noisy, 0)
    return match_total(np.maximum(kept, 0), total, log_w, exponentials)


def employed_threshold(epsilon: float, alpha: float, n_destinations: int) -> np.ndarray:
    """Per-destination thresholds for `thresholded_correction`: noise_threshold(epsilon,
    alpha) on the employed destinations, 1 (clipping only) on the non-employed one (the
    last). Privacy cost: none (public constants)."""
    threshold = np.full(n_destinations, noise_threshold(epsilon, alpha), dtype=np.int64)
    threshold[-1] = 1
    return threshold


def simplex_projection(noisy: np.ndarray, total: np.ndarray, log_w: np.ndarray) -> np.ndarray:
    """Least-squares post-processing: per row, the Euclidean projection x = max(y - theta, 0)
    of the noisy flows y onto {x >= 0, sum x = max(total, 0)} (theta by the sort-based
    algorithm), rounded to integers by largest remainder (`largest_remainder`: the floors,
    then the largest fractional parts, ties to the destinations the A.3.2 prior finds more
    likely). Deterministic: no draws. Privacy cost: none (post-processing)."""
    y = np.asarray(noisy, dtype=np.float64)
    target = np.maximum(np.asarray(total, dtype=np.int64), 0)
    ordered = -np.sort(-y, axis=1)
    excess = np.cumsum(ordered, axis=1) - target[:, None]
    j = np.arange(1, y.shape[1] + 1)
    support = np.maximum(np.sum(ordered - excess / j > 0, axis=1), 1)   # rho (>= 1 if total > 0)
    theta = excess[np.arange(len(y)), support - 1] / support
    projected = np.maximum(y - theta[:, None], 0.0)
    out = np.zeros(y.shape, dtype=np.int64)
    positive = target > 0
    if positive.any():
        out[positive] = largest_remainder(projected[positive], target[positive], log_w[positive])
    return out
