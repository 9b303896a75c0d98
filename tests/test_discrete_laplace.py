"""The exact discrete Laplace sampler: its law by enumeration of every bit path (small
words, exact fractions), its thresholds against certified bounds, no cap on the support,
the extreme bit patterns, and the vectorised path against the scalar one."""
from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest

from pseo_das.tasks.privacy.discrete_laplace import (_exp_bounds, draw, exact_index,
                                                     inversion_table, tail_floor,
                                                     value_of_index)


class NeedMore(Exception):
    """The path needs a word beyond the enumeration depth."""


def exp_minus(x: Fraction, bits: int = 200) -> tuple[Fraction, Fraction]:
    lo, hi = _exp_bounds(x, bits)
    return 1 / hi, 1 / lo


def law_bounds(epsilon: Fraction, j: int) -> tuple[Fraction, Fraction]:
    """Certified bounds of P(index = j) = (1-q)/(1+q) q^|x| for x = value_of_index(j)."""
    q_lo, q_hi = exp_minus(epsilon)
    m = abs(value_of_index(j))
    return (1 - q_hi) / (1 + q_hi) * q_lo ** m, (1 - q_lo) / (1 + q_lo) * q_hi ** m


def enumerate_paths(epsilon: Fraction, word_bits: int, depth: int):
    """The sampler's output law over every path of at most `depth` words: decided mass per
    index (exact fractions) and the mass of the paths still undecided at that depth."""
    table = inversion_table(epsilon, word_bits)
    decided: dict[int, Fraction] = {}
    unexplored = Fraction(0)

    def explore(words: list[int]) -> None:
        nonlocal unexplored
        rest = iter(words[1:])

        def next_word() -> int:
            try:
                return next(rest)
            except StopIteration:
                raise NeedMore from None
        try:
            j = exact_index(table, words[0], next_word)
        except NeedMore:
            if len(words) == depth:
                unexplored += Fraction(1, 2 ** (word_bits * depth))
                return
            for word in range(2 ** word_bits):
                explore(words + [word])
            return
        decided[j] = decided.get(j, 0) + Fraction(1, 2 ** (word_bits * len(words)))

    for first in range(2 ** word_bits):
        explore([first])
    return decided, unexplored


@pytest.mark.parametrize("epsilon", [Fraction(1, 2), Fraction(1), Fraction(3, 2)])
def test_every_bit_path_gives_the_exact_discrete_laplace_law(epsilon):
    word_bits, depth = 4, 3
    decided, unexplored = enumerate_paths(epsilon, word_bits, depth)
    assert sum(decided.values()) + unexplored == 1
    finest = Fraction(1, 2 ** (word_bits * depth))
    # undecided: at most one finest cell per tail mass T(j) above it, and [0, finest)
    boundaries = next(j for j in range(10 ** 4) if tail_floor(epsilon, j, word_bits * depth) == 0)
    assert unexplored <= (boundaries + 1) * finest
    for j in range(max(decided) + 3):
        lo, hi = law_bounds(epsilon, j)
        got = decided.get(j, Fraction(0))
        assert got <= hi, (j, float(got), float(hi))           # never more than the law
        assert lo - got <= 2 * finest, (j, float(lo - got))    # short only at the two edges
    # symmetric, and P(x)/P(x+1) = exp(epsilon) wherever both are decided to the finest cell
    for m in range(1, 4):
        plus, minus = decided[2 * m - 1], decided[2 * m]
        assert abs(plus - minus) <= 4 * finest
    e_lo, e_hi = _exp_bounds(epsilon, 200)                       # exp(epsilon)
    p1, p3 = decided[1], decided[3]                                  # x = +1 and x = +2
    assert (p1 - 2 * finest) / (p3 + 2 * finest) <= e_hi
    assert (p1 + 2 * finest) / (p3 - 2 * finest) >= e_lo


@pytest.mark.parametrize("epsilon", ["0.01", "0.1", "1", "1.5", "10", "1/3"])
def test_thresholds_are_the_exact_floors_of_the_tail_masses(epsilon):
    epsilon = Fraction(epsilon)
    table = inversion_table(epsilon)
    q_lo, q_hi = exp_minus(epsilon, 260)
    for j in list(range(min(12, len(table.thresholds)))) + [len(table.thresholds) - 1]:
        m = (j + 1) // 2
        t_lo, t_hi = ((q_lo ** m, q_hi ** m) if j % 2 else
                      (2 * q_lo ** (j // 2 + 1) / (1 + q_hi), 2 * q_hi ** (j // 2 + 1) / (1 + q_lo)))
        assert math.floor(t_lo * 2 ** 64) == table.thresholds[j] == math.floor(t_hi * 2 ** 64)
    assert tail_floor(epsilon, len(table.thresholds), 64) == 0      # the table ends at 0
    assert list(table.thresholds) == sorted(table.thresholds, reverse=True)


def _words(prefix: int, count: int) -> list[int]:
    return [(prefix >> (64 * (count - 1 - i))) & (2 ** 64 - 1) for i in range(count)]


@pytest.mark.parametrize("j", [199, 200, 1001])
def test_indices_far_beyond_the_table_are_reached(j):
    """No cap on the support: a V just inside (T(j), T(j-1)) gives j, beyond the table."""
    epsilon = Fraction(1)
    table = inversion_table(epsilon)
    assert j > len(table.thresholds)
    words = 24
    prefix = tail_floor(epsilon, j - 1, 64 * words) - 1
    assert prefix > tail_floor(epsilon, j, 64 * words)
    given = _words(prefix, words)
    rest = iter(given[1:])
    assert exact_index(table, given[0], lambda: next(rest)) == j
    assert value_of_index(j) == (j + 1) // 2 if j % 2 else -(j // 2)


def test_extreme_bit_patterns_terminate_with_the_exact_value():
    table = inversion_table(Fraction(1))
    top = np.array([2 ** 64 - 1] * 3, dtype=np.uint64)
    assert draw(table, top, lambda: 0).tolist() == [0, 0, 0]           # V near 1: x = 0
    ones = iter([2 ** 64 - 1] * 10)
    zero_then = draw(table, np.array([0], dtype=np.uint64), lambda: next(ones))
    # V = 2^-64 (1 - 2^-640): just below the table's end, decided exactly
    expected = exact_index(table, 0, iter([2 ** 64 - 1] * 10).__next__)
    assert zero_then.tolist() == [value_of_index(expected)]
    assert abs(zero_then[0]) >= 44   # q^44 = e^-44 > 2^-64: past every tabled index


def test_the_vectorised_path_equals_the_scalar_path_including_threshold_hits():
    table = inversion_table(Fraction(3, 2))
    rng = np.random.default_rng(7)
    words = rng.integers(0, 2 ** 64, size=20_000, dtype=np.uint64)
    words[:len(table.thresholds)] = np.array(table.thresholds, dtype=np.uint64)  # exact hits
    words[-3:] = [0, 1, 2]                                                       # the tail
    extra = rng.integers(0, 2 ** 64, size=1000, dtype=np.uint64).tolist()
    vector_extra, scalar_extra = iter(extra), iter(extra)
    vectorised = draw(table, words, lambda: next(vector_extra))
    scalar = [value_of_index(exact_index(table, int(w), lambda: next(scalar_extra)))
              for w in words]
    assert vectorised.tolist() == scalar


def test_drawing_over_the_words_themselves_gives_the_same_values():
    """`out` = the words viewed as int64 (a national table's noise held once): the same
    values as a separate array, threshold hits and the tail included, over several chunks,
    and the undecided words' following words taken in the same order."""
    from pseo_das.tasks.privacy import discrete_laplace
    table = inversion_table(Fraction(1, 3))
    rng = np.random.default_rng(11)
    words = rng.integers(0, 2 ** 64, size=3 * discrete_laplace.CHUNK + 17, dtype=np.uint64)
    hits = np.array(table.thresholds, dtype=np.uint64)
    for at in (0, discrete_laplace.CHUNK - 2, 2 * discrete_laplace.CHUNK + 5):
        words[at:at + 3] = hits[:3]
    words[-2:] = [0, 1]
    extra = rng.integers(0, 2 ** 64, size=1000, dtype=np.uint64).tolist()
    separate_extra, in_place_extra = iter(extra), iter(extra)
    separate = draw(table, words, lambda: next(separate_extra))
    in_place = words.copy()
    result = draw(table, in_place, lambda: next(in_place_extra), out=in_place.view(np.int64))
    assert np.shares_memory(result, in_place)
    assert np.array_equal(result, separate)
    assert next(separate_extra) == next(in_place_extra)   # as many following words taken


def test_the_sampler_is_bounded_at_the_smallest_and_largest_accepted_epsilon():
    """Every epsilon a configuration accepts (pseo_das/epsilon.py; sensitivity is 1 for
    every geometric measurement) builds its table in bounded time and memory, and its
    draws stay on the vectorised path. Measured on the 2-core machine: at 0.001 the table
    has 88,722 thresholds (3.9 MB), built in 0.1 s; 200,000 draws take 0.02 s (at 1e-6,
    refused, the table would be 89 million thresholds: minutes and 4.6 GB)."""
    import sys
    import time

    from pseo_das.epsilon import MAX_EPSILON, MIN_EPSILON
    from pseo_das.tasks.privacy.geometric import discrete_laplace_noise
    started = time.perf_counter()
    table = inversion_table.__wrapped__(MIN_EPSILON)        # not the cached one
    seconds = time.perf_counter() - started
    size = (sum(map(sys.getsizeof, table.thresholds)) + sys.getsizeof(table.thresholds)
            + table.ascending.nbytes)
    assert len(table.thresholds) == 88_722
    assert seconds < 5 and size < 8 * 2 ** 20, (seconds, size)
    assert len(inversion_table.__wrapped__(MAX_EPSILON).thresholds) >= 1   # a word decides
    for epsilon in (MIN_EPSILON, MAX_EPSILON):
        started = time.perf_counter()
        noise = discrete_laplace_noise(b"\x01" * 32, "bounded", epsilon, (200_000,))
        assert time.perf_counter() - started < 5 and noise.shape == (200_000,)


class PlantedStream:
    """A stand-in for the release's noise stream (`streams.NoiseStream`) over a fixed array
    of words, starting `at_word` words in, so that threshold hits can be planted where the
    blocks of a draw meet."""
    planted: np.ndarray = np.zeros(0, np.uint64)
    taken: list[int] = []          # the positions of the words taken one at a time

    def __init__(self, release_seed: bytes, stream_id: str, at_word: int = 0):
        self.at = at_word

    def words(self, size: int) -> np.ndarray:
        self.at += size
        return self.planted[self.at - size:self.at].copy()

    def word(self) -> int:
        self.at += 1
        PlantedStream.taken.append(self.at - 1)
        return int(self.planted[self.at - 1])


@pytest.mark.parametrize("shape, block_rows", [((37, 11), 5), ((100, 1021), 7), ((3, 5), 10),
                                               ((12, 4), 1)])
def test_blocks_of_rows_draw_the_values_of_the_whole_array(shape, block_rows):
    """A measurement drawn a block of rows at a time (into a file: a national flows table)
    gets the values of the one draw of the whole array, from the release's stream."""
    from pseo_das.tasks.privacy.geometric import discrete_laplace_blocks, discrete_laplace_noise
    whole = discrete_laplace_noise(bytes(32), "flows.I.cip4.y1@r/1", Fraction(1, 20), shape)
    blocks = list(discrete_laplace_blocks(bytes(32), "flows.I.cip4.y1@r/1", Fraction(1, 20),
                                          shape, block_rows))
    assert [start for start, _ in blocks] == list(range(0, shape[0], block_rows))
    assert np.array_equal(np.concatenate([values for _, values in blocks]), whole)


def test_blocks_take_the_undecided_words_in_the_order_of_the_whole_draw(monkeypatch):
    """Threshold hits planted in several blocks (at their edges too) and in the words that
    decide them: each undecided word takes the next of the words after the whole array's,
    block after block, as the one draw of the array takes them."""
    from pseo_das.tasks.privacy import geometric
    epsilon = Fraction(1, 2)
    table = inversion_table(epsilon)
    rows, columns, block_rows = 10, 6, 3
    size = rows * columns
    planted = np.random.default_rng(4).integers(0, 2 ** 64, size=size + 40, dtype=np.uint64)
    hits = [0, 17, 18, 35, 36, 59]                      # first, last and inner words of blocks
    for n, at in enumerate(hits):
        planted[at] = table.ascending[-1 - n]
    planted[size] = np.uint64(tail_floor(epsilon, 0, 128) & (2 ** 64 - 1))  # word 0: a second hit
    PlantedStream.planted = planted
    monkeypatch.setattr(geometric, "NoiseStream", PlantedStream)
    PlantedStream.taken = []
    whole = geometric.discrete_laplace_noise(bytes(32), "m", epsilon, (rows, columns))
    taken, PlantedStream.taken = PlantedStream.taken, []
    blocks = np.concatenate([values for _, values in geometric.discrete_laplace_blocks(
        bytes(32), "m", epsilon, (rows, columns), block_rows)])
    assert np.array_equal(blocks, whole)
    assert PlantedStream.taken == taken == list(range(size, size + len(taken)))
    assert len(taken) > len(hits)             # word 0 takes two
