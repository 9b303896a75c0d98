"""The mechanism layer: the only code that draws noise, and the privacy ledger it
writes to before every draw.

Noise comes from ChaCha20 (randomgen) under numpy's Generator: cryptographically
secure and seedable. Each tabulation gets its own stream, keyed by
SHA-256(release seed, tabulation id), and noise is assigned in the caller's canonical
cell order, so outputs depend only on seed, data and configuration.
"""
from __future__ import annotations

import hashlib
import math
import secrets
from dataclasses import asdict, dataclass

import numpy as np
import pandas as pd
from randomgen import ChaCha

GEOMETRIC = "two-sided geometric"
POST_PROCESSING = "post-processing (sum of noisy histograms)"
RANDOMIZED_POST_PROCESSING = "randomized post-processing (weighted draws)"
STREAM_DOMAIN = b"pseo-das/noise-stream/v1"


class PrivacyBudgetExceeded(RuntimeError):
    """A spend would take the release's total epsilon over its cap."""


@dataclass(frozen=True)
class LedgerEntry:
    tabulation_id: str
    product: str
    mechanism: str
    epsilon: float
    sensitivity: int
    n_cells: int
    n_bins: int
    composition: str
    derived_from: str
    noise_stream: str  # SHA-256 of the stream key: identifies the stream, reveals nothing


class PrivacyLedger:
    """Every measurement and derivation of a release. Spends compose sequentially
    and never exceed the cap; recording the same spend twice (a task retry) is a no-op."""

    def __init__(self, epsilon_cap: float):
        self.epsilon_cap = epsilon_cap
        self._entries: dict[str, LedgerEntry] = {}

    @property
    def entries(self) -> list[LedgerEntry]:
        return list(self._entries.values())

    @property
    def total_epsilon(self) -> float:
        return math.fsum(e.epsilon for e in self._entries.values())

    def record(self, entry: LedgerEntry) -> LedgerEntry:
        known = self._entries.get(entry.tabulation_id)
        if known is not None:
            if known != entry:
                raise PrivacyBudgetExceeded(
                    f"tabulation {entry.tabulation_id} is already in the ledger with "
                    "other parameters; a tabulation is measured once per release")
            return known
        if self.total_epsilon + entry.epsilon > self.epsilon_cap + 1e-12:
            raise PrivacyBudgetExceeded(
                f"spending epsilon {entry.epsilon:g} on {entry.tabulation_id} would take the "
                f"total to {self.total_epsilon + entry.epsilon:g}, over the cap "
                f"{self.epsilon_cap:g}")
        self._entries[entry.tabulation_id] = entry
        return entry

    def record_derived(self, tabulation_id: str, product: str, n_cells: int, n_bins: int,
                       derived_from: str) -> LedgerEntry:
        """Record a post-processed table (zero epsilon) and the noisy table it sums."""
        return self.record(LedgerEntry(
            tabulation_id, product, POST_PROCESSING, 0.0, 0, n_cells, n_bins,
            "post-processing of noisy measurements: no additional privacy loss",
            derived_from, ""))

    def to_frame(self) -> pd.DataFrame:
        columns = list(LedgerEntry.__dataclass_fields__)
        return pd.DataFrame([asdict(e) for e in self._entries.values()], columns=columns)


def fresh_release_seed() -> str:
    """256 fresh bits from the operating system's CSPRNG, as 64 hex digits."""
    return secrets.token_hex(32)


def seed_sha256(release_seed: bytes) -> str:
    """The seed's public fingerprint (documents carry this, never the seed)."""
    return hashlib.sha256(release_seed).hexdigest()


def stream_key(release_seed: bytes, tabulation_id: str) -> bytes:
    return hashlib.sha256(STREAM_DOMAIN + b"\x00" + release_seed + b"\x00"
                          + tabulation_id.encode()).digest()


def noise_generator(release_seed: bytes, tabulation_id: str) -> np.random.Generator:
    key = int.from_bytes(stream_key(release_seed, tabulation_id), "little")
    return np.random.Generator(ChaCha(key=key, counter=0, rounds=20))


def geometric_variance(epsilon: float) -> float:
    """Variance of the two-sided geometric noise: 2a/(1-a)^2 with a = exp(-epsilon)."""
    a = math.exp(-epsilon)
    return 2 * a / (1 - a) ** 2


def add_geometric_noise(ledger: PrivacyLedger, release_seed: bytes, tabulation_id: str,
                        product: str, true_counts: np.ndarray, epsilon: float) -> np.ndarray:
    """Noisy counts = true counts + (X - Y), X, Y i.i.d. Geometric(p = 1 - exp(-epsilon)),
    one draw per entry of `true_counts` (cells x bins, canonical order), zeros included.

    Privacy cost: `epsilon` for the whole array, provided every person contributes to at
    most one entry (sensitivity 1; parallel composition across cells). The spend is
    written to the ledger before any noise is drawn.
    """
    n_cells, n_bins = true_counts.shape
    ledger.record(LedgerEntry(
        tabulation_id, product, GEOMETRIC, float(epsilon), 1, n_cells, n_bins,
        "parallel across the cells of this tabulation (each graduate in at most one "
        "cell and bin); sequential with every other tabulation",
        "", hashlib.sha256(stream_key(release_seed, tabulation_id)).hexdigest()))
    generator = noise_generator(release_seed, tabulation_id)
    p = -math.expm1(-epsilon)
    x = generator.geometric(p, size=true_counts.shape)
    y = generator.geometric(p, size=true_counts.shape)
    return true_counts.astype(np.int64) + (x - y)


def post_processing_exponentials(ledger: PrivacyLedger, release_seed: bytes, step_id: str,
                                 product: str, n_cells: int, n_bins: int, derived_from: str,
                                 n_draws: int) -> np.ndarray:
    """`n_draws` standard exponential variates for a randomized post-processing step
    (`step_id`) that reads only the noisy table `derived_from`.

    Privacy cost: none (post-processing of noisy values); the step and its stream are
    recorded in the ledger with epsilon 0 before anything is drawn.
    """
    ledger.record(LedgerEntry(
        step_id, product, RANDOMIZED_POST_PROCESSING, 0.0, 0, n_cells, n_bins,
        "post-processing of noisy measurements: no additional privacy loss", derived_from,
        hashlib.sha256(stream_key(release_seed, step_id)).hexdigest()))
    return noise_generator(release_seed, step_id).standard_exponential(n_draws)


# --- Simulation noise for the accuracy study: no privacy ledger, never applied to confidential data ---
# The accuracy study (flows/accuracy_study.py) runs on synthetic data, and the expected-accuracy
# estimate (tasks/accuracy.py) redraws noise around already published noisy histograms. Neither
# releases anything computed from confidential values, so neither spends epsilon or writes to a
# ledger. Their streams use their own domain string, so they can never reproduce a release's noise.

SIMULATION_DOMAIN = b"pseo-das/simulation-stream/v1"
# Largest value of (1 + y^2) / (1 + y^4), reached at y^2 = sqrt(2) - 1: the rejection bound
# for sampling the density proportional to 1/(1 + y^4) from a Cauchy proposal.
_QUARTIC_OVER_CAUCHY = (1 + math.sqrt(2)) / 2


def simulation_generator(seed: bytes, stream_id: str) -> np.random.Generator:
    """ChaCha20 stream keyed by SHA-256(simulation domain, seed, stream id). Simulation only:
    no ledger entry, because nothing drawn from it touches confidential data."""
    digest = hashlib.sha256(SIMULATION_DOMAIN + b"\x00" + seed + b"\x00" + stream_id.encode()).digest()
    return np.random.Generator(ChaCha(key=int.from_bytes(digest, "little"), counter=0, rounds=20))


def simulated_geometric_noise(generator: np.random.Generator, epsilon: float,
                              shape: tuple[int, ...]) -> np.ndarray:
    """Two-sided geometric noise X - Y, X, Y i.i.d. Geometric(p = 1 - exp(-epsilon)), int64:
    the release's noise distribution, for simulations. Privacy cost: none (simulation)."""
    p = -math.expm1(-epsilon)
    return generator.geometric(p, size=shape) - generator.geometric(p, size=shape)


def sample_inverse_quartic(generator: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
    """Exact draws from the density (sqrt(2)/pi) / (1 + y^4) (the smooth-sensitivity noise of
    seed 000 section 4.2), by rejection from a standard Cauchy proposal: accept y when
    u * (1 + sqrt(2))/2 <= (1 + y^2)/(1 + y^4); acceptance rate 2/(2 + sqrt(2)) = 0.586.
    Privacy cost: none by itself (the caller scales it by a smooth sensitivity)."""
    size = math.prod(shape)
    accepted: list[np.ndarray] = []
    have = 0
    while have < size:
        want = int((size - have) * 1.75) + 64
        y = generator.standard_cauchy(want)
        u = generator.random(want)
        with np.errstate(over="ignore", invalid="ignore"):
            y2 = y * y
            keep = u * _QUARTIC_OVER_CAUCHY <= (1 + y2) / (1 + y2 * y2)
        accepted.append(y[keep])
        have += int(keep.sum())
    return np.concatenate(accepted)[:size].reshape(shape)
