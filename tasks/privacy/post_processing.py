"""Randomized post-processing draws: the weighted draws of the flows correction and the
CIP recast's split of noisy counts. They read only noisy measurements, so they cost no
privacy; their streams are keyed by the content addresses of the stored measurements they
read (`post_processing_seed`) and recorded in the ledger with zero epsilon.
"""
from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterator

import numpy as np

from pseo_das.tasks.privacy.ledger import (RANDOMIZED_POST_PROCESSING, LedgerEntry,
                                           derived_entry)
from pseo_das.tasks.privacy.streams import NoiseStream, stream_sha256

def post_processing_seed(sources: tuple[str, ...]) -> bytes:
    """The seed of a randomized post-processing step: SHA-256 of the content addresses of
    the stored measurements it reads. The same stored measurements give the same draws in
    every release and every republication; the draws carry no secret (post-processing)."""
    return hashlib.sha256(b"pseo-das/post-processing/v1\x00" + "\x00".join(sorted(sources))
                          .encode()).digest()


def post_processing_exponentials(stream_seed: bytes, step_id: str, product: str, n_cells: int,
                                 n_bins: int, derived_from: str
                                 ) -> tuple[Callable[[int], np.ndarray], LedgerEntry]:
    """Standard exponential variates for a randomized post-processing step (`step_id`) that
    reads only the noisy table `derived_from`, and its ledger entry. Returns `draw(n)`,
    which gives the stream's next n variates: successive calls continue one stream, so
    a step done block by block draws exactly what it would draw at once.

    Privacy cost: none (post-processing of noisy values).
    """
    entry = derived_entry(step_id, product, n_cells, n_bins, derived_from,
                          stream_sha256(stream_seed, step_id), RANDOMIZED_POST_PROCESSING)
    return NoiseStream(stream_seed, step_id).standard_exponential, entry


def post_processing_split_stream(stream_seed: bytes, step_id: str) -> NoiseStream:
    """The stream of a split (`post_processing_split_blocks`) of one table done in several
    calls, each continuing it: the same draws as the table split in one call. Privacy
    cost: none."""
    return NoiseStream(stream_seed, step_id)


SPLIT_BLOCK = 1 << 20   # counts split at a time by post_processing_split_blocks


def post_processing_split_blocks(stream_seed: bytes, step_id: str, product: str, n_cells: int,
                                 n_bins: int, derived_from: str, counts: np.ndarray,
                                 shares: np.ndarray, repeat: int = 1, block: int = SPLIT_BLOCK,
                                 stream: NoiseStream | None = None
                                 ) -> tuple[Iterator[tuple[int, np.ndarray]], LedgerEntry]:
    """Split each noisy count across destinations at random by `shares` (the CIP recast,
    technical appendix B): the magnitude |c| follows Multinomial(|c|, shares of its row)
    and every part keeps the sign of c, so the parts sum to c exactly. `counts`: (n,)
    int64; `shares`: (n / repeat, k) rows summing to 1 (zeros for destinations a row
    lacks), row i for counts i * repeat to (i + 1) * repeat - 1 (a cell's shares for each
    of its bins). Returns the parts, `block` counts at a time as (first count, parts of
    shape (b, k)), and the ledger entry of the step. The draws are the same whatever the
    block: one stream, consumed count by count in order. `stream`: the step's
    `post_processing_split_stream` when one table is split in several calls, each
    continuing it (None: a new stream, the table split in one call).

    Privacy cost: none (randomized post-processing of noisy measurements; the draws come
    from a stream keyed by the measurements' content addresses, recorded in the ledger).
    """
    entry = derived_entry(step_id, product, n_cells, n_bins, derived_from,
                          stream_sha256(stream_seed, step_id), RANDOMIZED_POST_PROCESSING)
    if len(counts) != len(shares) * repeat:
        raise ValueError(f"{step_id}: {len(counts)} counts for {len(shares)} share rows "
                         f"of {repeat} counts each")

    def blocks() -> Iterator[tuple[int, np.ndarray]]:
        draws = post_processing_split_stream(stream_seed, step_id) if stream is None else stream
        for first in range(0, len(counts), block):
            mine = np.asarray(counts[first:first + block], dtype=np.int64)
            rows = np.arange(first, first + len(mine)) // repeat
            # a count of 0 draws nothing from the stream (numpy's multinomial of 0 units)
            parts = draws.multinomial(np.abs(mine), shares[rows])
            parts *= np.sign(mine)[:, None]
            yield first, parts

    return blocks(), entry
