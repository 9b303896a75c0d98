"""The exact regime: two-sided geometric noise (discrete Laplace) on counts, pure
epsilon-DP, drawn exactly from the stream's 64-bit words (`discrete_laplace`: integers
only, unbounded support, no floating point), so no delta is lost to the sampler.
"""
from __future__ import annotations

import math
from collections import deque
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from fractions import Fraction
from itertools import islice
from typing import TYPE_CHECKING, Protocol

import numpy as np

if TYPE_CHECKING:
    import pandas as pd

from pseo_das.epsilon import exact_epsilon
from pseo_das.tasks.privacy.discrete_laplace import decide, draw, draw_decided, inversion_table
from pseo_das.tasks.privacy.ledger import NoisyMeasurement, RowBlocks, measured_entry
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


def discrete_laplace_noise(release_seed: bytes, measurement_id: str,
                           epsilon: float | str | Fraction, shape: tuple[int, ...]) -> np.ndarray:
    """Two-sided geometric noise, exactly: one value per entry of `shape`, from the
    ChaCha20 stream SHA-256(domain, seed, measurement id), 64-bit words in order, by the
    integer-only inversion of `discrete_laplace` (words it cannot decide alone take the
    following words of the same stream)."""
    table = inversion_table(exact_epsilon(epsilon))
    stream = NoiseStream(release_seed, measurement_id)
    size = int(np.prod(shape, dtype=np.int64))
    words = stream.words(size)
    return draw(table, words, stream.word, out=words.view(np.int64)).reshape(shape)


# threads drawing the next blocks of `discrete_laplace_blocks` while one is used (randomgen's
# ChaCha20 lets go of the interpreter lock while it makes words)
DRAW_THREADS = 2


def discrete_laplace_blocks(release_seed: bytes, measurement_id: str,
                            epsilon: float | str | Fraction, shape: tuple[int, int],
                            block_rows: int) -> Iterator[tuple[int, np.ndarray]]:
    """`discrete_laplace_noise` of a rows x columns array, `block_rows` rows at a time, in
    order: (first row, its values). The same values: a block's words are the stream's from
    its first entry's, and the words its undecided ones take come from where the whole
    array's words end, continued block after block (the order of the whole draw). The
    next DRAW_THREADS blocks' words are drawn and decided in threads while a block is used
    (`draw_decided`); their undecided words are decided here, in block order (`decide`)."""
    table = inversion_table(exact_epsilon(epsilon))
    n_rows, n_columns = shape
    following = NoiseStream(release_seed, measurement_id, at_word=n_rows * n_columns)

    def decided(start: int) -> tuple[np.ndarray, list[tuple[int, int]]]:
        rows = min(block_rows, n_rows - start)
        words = NoiseStream(release_seed, measurement_id,
                            at_word=start * n_columns).words(rows * n_columns)
        return draw_decided(table, words, out=words.view(np.int64))

    starts = iter(range(0, n_rows, block_rows))
    with ThreadPoolExecutor(DRAW_THREADS, thread_name_prefix="pseo-das-draw") as threads:
        pending = deque((start, threads.submit(decided, start))
                        for start in islice(starts, DRAW_THREADS))
        while pending:
            start, block = pending.popleft()
            following_start = next(starts, None)
            if following_start is not None:
                pending.append((following_start, threads.submit(decided, following_start)))
            values, undecided = block.result()
            yield start, decide(table, values, undecided,
                                following.word).reshape(-1, n_columns)


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


class RowSinkLike(Protocol):
    """Where a measurement drawn by blocks of rows goes (tasks/inputs/row_files.RowSink):
    `append(block)` in row order, then `result()`: the whole values (`RowBlocks`)."""
    def append(self, block: np.ndarray) -> None: ...

    def result(self) -> np.ndarray | RowBlocks: ...


# cells drawn at a time into a sink (national flows: 67 MB; with the DRAW_THREADS blocks
# drawn ahead, 201 MB)
DRAW_BLOCK_ROWS = 8_192


def measure_with_geometric_noise(release_seed: bytes, statement: PrivacyStatement,
                                 cells: pd.DataFrame, true_counts: np.ndarray | CountEntries,
                                 sensitivity: int = 1, sink: RowSinkLike | None = None
                                 ) -> NoisyMeasurement:
    """Noisy counts = true counts + two-sided geometric noise (discrete Laplace, P(x) =
    (1-q)/(1+q) q^|x|, q = exp(-epsilon / k)), one draw per entry of `true_counts` (cells
    x the statement's columns, canonical order; dense, or as its non-zero entries:
    `CountEntries`), zeros included, drawn exactly (no floating
    point; unbounded support) from the stream SHA-256(domain, seed, statement's stream id).
    `sensitivity` k: what the counts were bounded to (each person adds at most k in all:
    the contribution bound of the counting pass); the statement must declare the same.

    Privacy cost: the statement's epsilon (pure epsilon-DP) for the whole array, provided
    every person contributes at most k to the entries in all (L1 sensitivity k; k = 1:
    parallel composition across cells). The ledger entry is returned with the noise: no
    noise leaves this function without its entry.

    `sink`: the noisy counts drawn DRAW_BLOCK_ROWS cells at a time into it (the same values
    as drawn whole: `discrete_laplace_blocks`), never the whole array in memory.
    """
    shaped = (true_counts if isinstance(true_counts, np.ndarray)     # entries: a view, no copy
              else np.broadcast_to(np.int8(0), true_counts.shape))
    statement.check_calibration(Mechanism.GEOMETRIC, shaped, sensitivity)
    n_cells, n_bins = true_counts.shape
    entry = measured_entry(statement, n_cells, n_bins,
                           geometric_composition(sensitivity),
                           stream_sha256(release_seed, statement.stream_id))
    epsilon = geometric_noise_epsilon(statement.epsilon, sensitivity)
    if sink is None:
        noise = discrete_laplace_noise(release_seed, statement.stream_id, epsilon,
                                       true_counts.shape)
        _add_counts(noise, true_counts, 0)
        return NoisyMeasurement(statement.stream_id, cells, noise, entry)
    for start, noise in discrete_laplace_blocks(release_seed, statement.stream_id, epsilon,
                                                (n_cells, n_bins), DRAW_BLOCK_ROWS):
        _add_counts(noise, true_counts, start)
        sink.append(noise)
    return NoisyMeasurement(statement.stream_id, cells, sink.result(), entry)


def _add_counts(noise: np.ndarray, true_counts: np.ndarray | CountEntries, start: int) -> None:
    """Add to `noise` (rows start.. of the measurement) their true counts, in place (one
    array, not three)."""
    rows, width = noise.shape
    if isinstance(true_counts, np.ndarray):
        noise += true_counts[start:start + rows].astype(np.int64, copy=False)
    else:   # counts held as their non-zero entries (tasks/inputs/sparse_counts.py), in order
        first, last = np.searchsorted(true_counts.flat, [start * width, (start + rows) * width])
        noise.reshape(-1)[true_counts.flat[first:last] - start * width] += \
            true_counts.count[first:last]
