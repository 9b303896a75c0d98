"""Stream derivation: the only code that keys a random number generator for a release.

Noise comes from ChaCha20 (randomgen): cryptographically secure and seedable. Each
measurement (and each randomized post-processing step) gets its own stream, keyed by
SHA-256(domain, release seed, stream id), so outputs depend only on seed, data and
configuration. A `NoiseStream` hands out draws, never its generator: the regime modules
(geometric.py, employer_side.py, laplace.py, post_processing.py) draw from it and return
each measurement with its ledger entry. Privacy cost: none by itself.
"""
from __future__ import annotations

import hashlib
import secrets

import numpy as np
from randomgen import ChaCha

STREAM_DOMAIN = b"pseo-das/noise-stream/v1"


def fresh_seed_bits() -> bytes:
    """256 fresh bits from the operating system's CSPRNG: a new release seed."""
    return secrets.token_bytes(32)


def stream_key(release_seed: bytes, tabulation_id: str) -> bytes:
    return hashlib.sha256(STREAM_DOMAIN + b"\x00" + release_seed + b"\x00"
                          + tabulation_id.encode()).digest()


def stream_sha256(release_seed: bytes, stream_id: str) -> str:
    """What a ledger entry records of a noise stream: the SHA-256 of its key (the key
    itself would let anyone redraw the noise)."""
    return hashlib.sha256(stream_key(release_seed, stream_id)).hexdigest()


class NoiseStream:
    """The ChaCha20 stream (20 rounds) keyed by SHA-256(domain, seed, stream id), consumed
    in order by the draws below (the names and arguments of numpy's Generator, which it
    wraps and never hands out). `at_word`: where it starts, in 64-bit words from the
    stream's first (the cipher's counter counts 32-bit words)."""

    def __init__(self, release_seed: bytes, stream_id: str, at_word: int = 0):
        key = int.from_bytes(stream_key(release_seed, stream_id), "little")
        self._generator = np.random.Generator(ChaCha(key=key, counter=2 * at_word, rounds=20))

    def words(self, size: int) -> np.ndarray:
        """The stream's next `size` 64-bit words (uint64)."""
        return self._generator.bit_generator.random_raw(size)

    def word(self) -> int:
        """The stream's next 64-bit word."""
        return int(self._generator.bit_generator.random_raw())

    def random(self, size: int | tuple[int, ...]) -> np.ndarray:
        """Uniform doubles in [0, 1)."""
        return self._generator.random(size)

    def laplace(self, loc: float, scale: float, size: int | tuple[int, ...]) -> np.ndarray:
        return self._generator.laplace(loc, scale, size)

    def standard_cauchy(self, size: int | tuple[int, ...]) -> np.ndarray:
        return self._generator.standard_cauchy(size)

    def standard_exponential(self, size: int | tuple[int, ...]) -> np.ndarray:
        return self._generator.standard_exponential(size)

    def multinomial(self, n: np.ndarray, pvals: np.ndarray) -> np.ndarray:
        return self._generator.multinomial(n, pvals)


def synthesis_uniforms(synthesis_seed: bytes, step_id: str, count: int) -> np.ndarray:
    """`count` uniforms in [0, 1) for a step of the CART synthesizer (`pseo-das
    synthesize`, tasks/synthesis), from a ChaCha20 stream keyed by SHA-256(domain, seed,
    'synthesis/' + step id), so a synthetic file is reproducible from its seed.

    Privacy cost: NOT differentially private and not recorded in any ledger, because no
    guarantee is claimed: the synthesizer uses these draws to pick confidential donors'
    values from the leaves of models fitted on the confidential data. Its output carries no
    formal privacy guarantee and needs disclosure review before any release (its report
    says so).
    """
    return NoiseStream(synthesis_seed, "synthesis/" + step_id).random(count)


# What the samplers shared with the studies draw from: a release stream, or a simulation
# generator (tasks/study/simulation_noise.py).
Draws = NoiseStream | np.random.Generator
