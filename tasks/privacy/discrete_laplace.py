"""Exact sampling of the two-sided geometric (discrete Laplace) distribution from random
words, with integers only. Privacy cost: none by itself (`geometric.py` feeds it the
release's ChaCha20 stream and records the spend).

For epsilon > 0 (an exact rational) and q = exp(-epsilon), the noise X has
P(X = x) = (1 - q) / (1 + q) * q^|x| for every integer x: unbounded support, pure
epsilon-DP for a count of sensitivity 1.

Method: inversion of a uniform V in (0, 1) whose binary digits are the random words. The
integers are visited in the order j = 0, 1, 2, ... <-> x = 0, +1, -1, +2, -2, ..., whose
tail masses have closed forms: T(j) = P(index > j) is q^m for j = 2m - 1 and
2 q^(m+1) / (1 + q) for j = 2m. The output is the first j with V > T(j). Each comparison is
decided on integers: with the first w bits of V as the word u, V > T(j) is certain when
u > floor(T(j) 2^w) and impossible when u < floor(T(j) 2^w); only u = floor(T(j) 2^w)
(probability 2^-w per threshold) needs the next word, and so on. The thresholds are
computed exactly from certified rational bounds of exp(-epsilon) (T(j) is irrational, so
its floor at any precision is reached after finitely many refinements). No floating-point
number is on the path from random words to noise, and no value is out of reach: an index
beyond the table is decided by the same exact comparison, deeper.

With 64-bit words one word per draw decides all but a fraction of about 2^-63 of the
draws (one searchsorted in a table of floor(T(j) 2^64) > 0); the rest take the exact
scalar path.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from fractions import Fraction
from functools import lru_cache

import numpy as np

WORD_BITS = 64


def _exp_bounds(x: Fraction, bits: int) -> tuple[Fraction, Fraction]:
    """lo <= exp(x) <= hi for rational x >= 0, with hi - lo < exp(x) 2^-bits."""
    total, term, k = Fraction(0), Fraction(1), 0
    while True:
        total += term
        k += 1
        term = term * x / k
        # the remainder sum_{i>=k} x^i/i! is at most term / (1 - x/(k+1)) once k+1 > 2x
        if k + 1 > 2 * x and term * 2 < total / 2 ** bits:
            return total, total + term * 2


@lru_cache(maxsize=64)
def _q_fixed(epsilon: Fraction, precision: int) -> tuple[int, int]:
    """q = exp(-epsilon) as fixed-point integers: q_lo / 2^P <= q <= q_hi / 2^P."""
    lo, hi = _exp_bounds(epsilon, precision + 4)
    one = 1 << precision
    return (one * hi.denominator) // hi.numerator, -((-one * lo.denominator) // lo.numerator)


def _tail_fixed(epsilon: Fraction, j: int, precision: int, q: tuple[int, int] | None = None,
                power: tuple[int, int] | None = None) -> tuple[int, int]:
    """Fixed-point bounds (scale 2^P) of T(j), the mass of the indices after j."""
    q_lo, q_hi = q or _q_fixed(epsilon, precision)
    one = 1 << precision
    m = (j + 1) // 2 if j % 2 else j // 2 + 1           # T(2m-1) = q^m, T(2m) needs q^(m+1)
    if power is None:
        power = (one, one)
        for _ in range(m):
            power = ((power[0] * q_lo) >> precision, -((-power[1] * q_hi) >> precision))
    a_lo, a_hi = power
    if j % 2:                                          # j = 2m - 1: q^m
        return a_lo, a_hi
    return (2 * a_lo * one) // (one + q_hi), -((-2 * a_hi * one) // (one + q_lo))


def tail_floor(epsilon: Fraction, j: int, bits: int) -> int:
    """floor(T(j) * 2^bits), exactly (j >= 0)."""
    precision = bits + 64 + max(j, 1).bit_length()
    while True:
        lo, hi = _tail_fixed(epsilon, j, precision)
        shift = precision - bits
        if lo >> shift == hi >> shift:
            return lo >> shift
        precision *= 2


@dataclass(frozen=True)
class InversionTable:
    """floor(T(j) 2^w) for j = 0 .. J-1: every index whose threshold is at least 1."""
    epsilon: Fraction
    word_bits: int
    thresholds: tuple[int, ...]          # decreasing (ties possible for tiny epsilon)
    ascending: np.ndarray | None         # uint64, for 64-bit words: the vectorised path


@lru_cache(maxsize=32)
def inversion_table(epsilon: Fraction, word_bits: int = WORD_BITS) -> InversionTable:
    """The thresholds of the first word (computed once per epsilon, exactly)."""
    epsilon = Fraction(epsilon)
    if epsilon <= 0:
        raise ValueError(f"epsilon must be positive, got {epsilon}")
    precision = 2 * word_bits + 64
    q = _q_fixed(epsilon, precision)
    one = 1 << precision
    thresholds, power, j = [], (one, one), 0
    while True:
        if j % 2 == 0:     # T(2m) uses q^(m+1); T(2m+1) = q^(m+1) reuses it
            power = ((power[0] * q[0]) >> precision, -((-power[1] * q[1]) >> precision))
        lo, hi = _tail_fixed(epsilon, j, precision, q, power)
        shift = precision - word_bits
        value = lo >> shift if lo >> shift == hi >> shift else tail_floor(epsilon, j, word_bits)
        if value == 0:
            break
        thresholds.append(value)
        j += 1
    ascending = (np.array(thresholds[::-1], dtype=np.uint64) if word_bits == 64 else None)
    return InversionTable(epsilon, word_bits, tuple(thresholds), ascending)


def value_of_index(index):
    """Index j -> noise value: 0, +1, -1, +2, -2, ... (an int, or an int64 array)."""
    half = (index + 1) >> 1
    if isinstance(index, np.ndarray):
        odd = (index & 1).astype(bool)
        return np.where(odd, half, -(index >> 1))
    return half if index & 1 else -(index >> 1)


def exact_index(table: InversionTable, first_word: int, next_word: Callable[[], int]) -> int:
    """The inversion index for V = 0.(first_word)(next words...) in base 2^w, decided
    exactly: the scalar path (rare with 64-bit words; every path in the tests)."""
    w = table.word_bits
    words = [first_word]
    j = 0
    while True:
        k = 1
        while True:                                  # is V > T(j)?
            bits = k * w
            threshold = table.thresholds[j] if k == 1 and j < len(table.thresholds) else \
                tail_floor(table.epsilon, j, bits)
            prefix = 0
            for word in words[:k]:
                prefix = (prefix << w) | word
            if prefix != threshold:
                break
            k += 1
            if len(words) < k:
                words.append(next_word())
        if prefix > threshold:
            return j
        j += 1


CHUNK = 1 << 18   # words per vectorised step (fits the cache)


def draw(table: InversionTable, words: np.ndarray,
         next_word: Callable[[], int], out: np.ndarray | None = None) -> np.ndarray:
    """One discrete Laplace value per 64-bit word of `words` (int64): the vectorised
    inversion (`draw_decided`), with the undecided words (a threshold hit exactly, or
    beyond the table) passed in index order to `exact_index`, which takes further words
    from `next_word`. `out`: where the values go (None: a new array); it may be `words`
    itself viewed as int64, so a national table's noise is held once, not beside its
    words."""
    out, undecided = draw_decided(table, words, out)
    return decide(table, out, undecided, next_word)


def draw_decided(table: InversionTable, words: np.ndarray, out: np.ndarray | None = None
                 ) -> tuple[np.ndarray, list[tuple[int, int]]]:
    """The vectorised inversion of `draw`, which takes no further word: the values of the
    words it decides, and the (index, word) of those it leaves undecided, in index order
    (`decide` gives them their values). `out` may be `words` viewed as int64 (each chunk's
    words are read before its values are written)."""
    ascending = table.ascending
    if ascending is None:
        raise ValueError(f"the vectorised draw takes 64-bit words; this table is of "
                         f"{table.word_bits}-bit words (use exact_index)")
    size = len(ascending)
    # position p = number of thresholds below the word: index size - p, unless the word
    # equals the threshold at p (then undecided) or p = 0 (beyond the table)
    padded = np.append(ascending, np.uint64(0))   # the sentinel never equals a word at p = size
    value_at = value_of_index(size - np.arange(size + 1, dtype=np.int64))
    out = np.empty(len(words), dtype=np.int64) if out is None else out
    undecided_all: list[tuple[int, int]] = []
    for start in range(0, len(words), CHUNK):
        chunk = words[start:start + CHUNK]
        position = np.searchsorted(ascending, chunk, side="left")
        undecided = np.flatnonzero((np.take(padded, position) == chunk) | (position == 0))
        undecided_all += zip((start + undecided).tolist(),
                             chunk[undecided].tolist())   # before `out` may overwrite them
        np.take(value_at, position, out=out[start:start + CHUNK])
    return out, undecided_all


def decide(table: InversionTable, out: np.ndarray, undecided: list[tuple[int, int]],
           next_word: Callable[[], int]) -> np.ndarray:
    """`out` with the values of `draw_decided`'s undecided words, in their order, each
    taking its further words from `next_word` (`exact_index`)."""
    for i, word in undecided:
        out[i] = value_of_index(exact_index(table, word, next_word))
    return out
