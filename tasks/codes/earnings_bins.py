"""Earnings coded into the histogram bins of the earnings tables. Privacy cost: none."""
from __future__ import annotations

import numpy as np


def earnings_bin(earnings: np.ndarray, bin_edges: tuple[int, ...]) -> np.ndarray:
    """0-based bin of earnings at or above the floor (bin_edges[0]); the top edge and above
    fall in the last bin."""
    return np.searchsorted(np.asarray(bin_edges, dtype=np.float64), earnings,
                           side="right").astype(np.int64) - 1
