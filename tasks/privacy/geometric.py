"""The exact regime: two-sided geometric noise (discrete Laplace) on counts, pure
epsilon-DP, drawn exactly from the stream's 64-bit words (`discrete_laplace`: integers
only, unbounded support, no floating point), so no delta is lost to the sampler.
"""
from __future__ import annotations

import math
from fractions import Fraction

from typing import TYPE_CHECKING, Protocol

import numpy as np

if TYPE_CHECKING:
    import pandas as pd

from pseo_das.epsilon import exact_epsilon
from pseo_das.tasks.privacy.discrete_laplace import (draw, draw_decided, exact_index,
                                                     inversion_table, value_of_index)
from pseo_das.tasks.privacy.ledger import NoisyMeasurement, measured_entry
from pseo_das.tasks.privacy.statement import Mechanism, PrivacyStatement
from pseo_das.tasks.privacy.streams import NoiseStream, stream_sha256

COMPOSITION = ("parallel across the cells of this tabulation (each graduate in at most one "
               "cell and bin); sequential with every other tabulation")


def geometric_composition(k: int) -> str:
    """The ledger's composition text of geometric counts with contribution bound k."""
    if k == 1:
        return COMPOSITION
    return (f"each person in at most {k} cells and bins of this tabulation (at most {k} degree "
            f"records: sensitivity {k}, noise at epsilon / {k}); sequential with every other "
            "tabulation")


def geometric_variance(epsilon: float | Fraction, sensitivity: int = 1) -> float:
    """Variance of the two-sided geometric noise at epsilon for counts of `sensitivity`
    k: 2a/(1-a)^2 with a = exp(-epsilon / k)."""
    a = math.exp(-float(epsilon) / sensitivity)
    return 2 * a / (1 - a) ** 2


NARROW_BLOCK_WORDS = 1 << 22   # words drawn at a time for noise held narrower than int64


def discrete_laplace_noise(release_seed: bytes, measurement_id: str,
                           epsilon: float | str | Fraction, shape: tuple[int, ...],
                           dtype: type = np.int64) -> np.ndarray:
    """Two-sided geometric noise, exactly: one value per entry of `shape`, from the
    ChaCha20 stream SHA-256(domain, seed, measurement id), 64-bit words in order, by the
    integer-only inversion of `discrete_laplace` (words it cannot decide alone take the
    words that follow the array's, in index order). `dtype` int32: the same values held
    in 4 bytes each, drawn NARROW_BLOCK_WORDS words at a time (a national flows table is
    400 million values); int64 if a value does not fit."""
    table = inversion_table(exact_epsilon(epsilon))
    stream = NoiseStream(release_seed, measurement_id)
    size = int(np.prod(shape, dtype=np.int64))
    if np.dtype(dtype) == np.int64:
        words = stream.words(size)
        return draw(table, words, stream.word, out=words.view(np.int64)).reshape(shape)
    out: np.ndarray = np.empty(size, dtype)
    undecided: list[tuple[int, int]] = []
    for start in range(0, size, NARROW_BLOCK_WORDS):
        words = stream.words(min(NARROW_BLOCK_WORDS, size - start))
        positions, held = draw_decided(table, words, words.view(np.int64))
        out[start:start + len(words)] = words.view(np.int64)   # within the table's values
        undecided += zip([start + p for p in positions], held)
    for position, word in undecided:      # the words after the array's, as `draw` takes them
        value = value_of_index(exact_index(table, word, stream.word))
        if not np.iinfo(out.dtype).min <= value <= np.iinfo(out.dtype).max:
            out = out.astype(np.int64)
        out[position] = value
    return out.reshape(shape)


def geometric_noise_epsilon(epsilon: float | str | Fraction, sensitivity: int) -> Fraction:
    """The parameter of the two-sided geometric noise that gives epsilon-DP for counts of
    L1 sensitivity `sensitivity`: epsilon / sensitivity, exactly (q = exp(-epsilon / k),
    p = 1 - q)."""
    return exact_epsilon(epsilon) / sensitivity


class CountEntries(Protocol):
    """True counts held as their non-zero entries (tasks/inputs/sparse_counts.SparseCounts):
    `flat` (row * columns + column, distinct) and `count`."""
    @property
    def shape(self) -> tuple[int, int]: ...

    @property
    def flat(self) -> np.ndarray: ...

    @property
    def count(self) -> np.ndarray: ...


def measure_with_geometric_noise(release_seed: bytes, statement: PrivacyStatement,
                                 cells: pd.DataFrame, true_counts: np.ndarray | CountEntries,
                                 sensitivity: int = 1, dtype: type = np.int64
                                 ) -> NoisyMeasurement:
    """Noisy counts = true counts + two-sided geometric noise (discrete Laplace, P(x) =
    (1-q)/(1+q) q^|x|, q = exp(-epsilon / k)), one draw per entry of `true_counts` (cells
    x the statement's columns, canonical order; dense, or as its non-zero entries:
    `CountEntries`), zeros included, drawn exactly (no floating
    point; unbounded support) from the stream SHA-256(domain, seed, statement's stream id).
    `sensitivity` k: what the counts were bounded to (each person adds at most k in all:
    the contribution bound of the counting pass); the statement must declare the same.
    `dtype`: the noisy counts' type (int32: the same values in half the memory; int64
    whenever one would not fit).

    Privacy cost: the statement's epsilon (pure epsilon-DP) for the whole array, provided
    every person contributes at most k to the entries in all (L1 sensitivity k; k = 1:
    parallel composition across cells). The ledger entry is returned with the noise: no
    noise leaves this function without its entry.
    """
    shaped = (true_counts if isinstance(true_counts, np.ndarray)     # entries: a view, no copy
              else np.broadcast_to(np.int8(0), true_counts.shape))
    statement.check_calibration(Mechanism.GEOMETRIC, shaped, sensitivity)
    n_cells, n_bins = true_counts.shape
    entry = measured_entry(statement, n_cells, n_bins,
                           geometric_composition(sensitivity),
                           stream_sha256(release_seed, statement.stream_id))
    noise = discrete_laplace_noise(release_seed, statement.stream_id,
                                   geometric_noise_epsilon(statement.epsilon, sensitivity),
                                   true_counts.shape, dtype)
    largest = int(true_counts.max(initial=0) if isinstance(true_counts, np.ndarray)
                  else true_counts.count.max(initial=0))
    if noise.size and int(noise.max()) + largest > np.iinfo(noise.dtype).max:
        noise = noise.astype(np.int64)        # a noisy count would not fit: never narrower
    if isinstance(true_counts, np.ndarray):   # in place: one array, not three
        noise += true_counts.astype(np.int64, copy=False)
    else:   # counts held as their non-zero entries (tasks/inputs/sparse_counts.py)
        noise.reshape(-1)[true_counts.flat] += true_counts.count
    return NoisyMeasurement(statement.stream_id, cells, noise, entry)
