"""Simulation noise for the accuracy study and the expected-accuracy estimate of the DRB
report: never applied to confidential data, so no privacy ledger.

The accuracy study (flows/accuracy_study.py) runs on synthetic data, and the expected-accuracy
estimate (tasks/study/accuracy.py) redraws noise around already published noisy histograms.
Neither releases anything computed from confidential values, so neither spends epsilon or
writes to a ledger. Their streams use their own domain string, so they can never reproduce a
release's noise. Release noise is drawn only by the privacy core (tasks/privacy/streams.py).
"""
from __future__ import annotations

import hashlib
import math
from fractions import Fraction

import numpy as np
from randomgen import ChaCha

from pseo_das.epsilon import exact_epsilon
from pseo_das.tasks.privacy.discrete_laplace import draw, inversion_table
# The exact 1/(1 + y^4) sampler lives in the mechanism layer (the Smooth Gamma mechanism
# draws release noise with it); the study calls it on its own simulation streams.
from pseo_das.tasks.privacy.employer_side import sample_inverse_quartic  # noqa: F401


SIMULATION_DOMAIN = b"pseo-das/simulation-stream/v1"


def simulation_generator(seed: bytes, stream_id: str) -> np.random.Generator:
    """ChaCha20 stream keyed by SHA-256(simulation domain, seed, stream id). Simulation only:
    no ledger entry, because nothing drawn from it touches confidential data."""
    digest = hashlib.sha256(SIMULATION_DOMAIN + b"\x00" + seed + b"\x00" + stream_id.encode()).digest()
    return np.random.Generator(ChaCha(key=int.from_bytes(digest, "little"), counter=0, rounds=20))


def simulation_sample(seed: bytes, stream_id: str, n: int, probability: float) -> np.ndarray:
    """n independent choices, each True with `probability`, from a simulation stream: which
    cells a simulation runs on when a table is too large to simulate whole."""
    return simulation_generator(seed, stream_id).random(n) < probability


def simulated_geometric_noise(generator: np.random.Generator, epsilon: float,
                              shape: tuple[int, ...]) -> np.ndarray:
    """Two-sided geometric noise X - Y, X, Y i.i.d. Geometric(p = 1 - exp(-epsilon)), int64:
    the release's noise distribution, for simulations. Privacy cost: none (simulation)."""
    p = -math.expm1(-epsilon)
    noise = generator.geometric(p, size=shape)
    noise -= generator.geometric(p, size=shape)   # in place: two arrays of the shape, not three
    return noise


def exact_geometric_noise(seed: bytes, stream_id: str, epsilon: float | Fraction,
                          shape: tuple[int, ...]) -> np.ndarray:
    """Two-sided geometric noise at `epsilon`, int64, drawn exactly as the release draws it
    (the integer-only inversion of tasks/privacy/discrete_laplace.py, 64-bit words in
    order) from the simulation stream (seed, stream id), never a release stream.
    Privacy cost: none (simulation)."""
    table = inversion_table(exact_epsilon(epsilon))
    bits = simulation_generator(seed, stream_id).bit_generator
    size = math.prod(shape)
    return draw(table, bits.random_raw(size), lambda: int(bits.random_raw())).reshape(shape)


def simulated_laplace_noise(generator: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
    """Standard Laplace draws (scale 1), the law of the release's continuous Laplace noise
    (the cell statistics), for simulations. Privacy cost: none (simulation)."""
    return generator.laplace(0.0, 1.0, shape)


def summed_geometric_noise(generator: np.random.Generator, epsilon: float, terms: np.ndarray,
                           n_bins: int) -> np.ndarray:
    """The noise of a sum of `terms[i]` noisy histograms in row i: each bin the sum of that
    many independent two-sided geometric draws at `epsilon`. Privacy cost: none (simulation)."""
    out = np.zeros((len(terms), n_bins), np.int64)
    for t in range(1, int(terms.max(initial=0)) + 1):
        rows = terms >= t
        out[rows] += simulated_geometric_noise(generator, epsilon, (int(rows.sum()), n_bins))
    return out


def within_bin_truth(generator: np.random.Generator, stand_in: np.ndarray, lower: np.ndarray,
                     upper: np.ndarray, percentiles: tuple[int, ...]) -> np.ndarray:
    """One draw of true percentiles consistent with the stand-in histograms (cells x bins,
    every total positive): the values of a bin spread uniformly over it, so the percentile
    of rank m = ceil(n X / 100), the k-th of the q values of its bin, is
    lower + (upper - lower) * Beta(k, q - k + 1) (the k-th order statistic of q uniform
    values). The release interpolates linearly within the bin; the distance between the
    two is the interpolation error. Returns cells x len(percentiles)."""
    cumulative = np.cumsum(stand_in, axis=1)
    total = cumulative[:, -1]
    rows = np.arange(len(stand_in))
    out = np.empty((len(stand_in), len(percentiles)))
    for k, x in enumerate(percentiles):
        rank = np.maximum(1, -((-total * x) // 100))
        j = np.argmax(cumulative >= rank[:, None], axis=1)
        within = rank - np.where(j > 0, cumulative[rows, j - 1], 0)
        position = generator.beta(within, stand_in[rows, j] - within + 1)
        out[:, k] = lower[j] + (upper[j] - lower[j]) * position
    return out
