"""Benchmark of the release noise: the exact integer-only sampler against the float paths.

    python benchmarks/bench_noise.py [--draws 20000000] [--repeat 3]

For epsilon 1 and 1.5, the time of `--draws` two-sided geometric draws, in one process
(so the three compare under the same load), best of --repeat, in ns per draw:

  exact        the release's sampler: pseo_das.tasks.privacy.geometric.discrete_laplace_noise
               (ChaCha20 words -> integer-only inversion, discrete_laplace.py)
  float        the path releases used before it: ChaCha20 under numpy's Generator,
               X - Y with X, Y = Generator.geometric(1 - exp(-epsilon)) (float inversion)
  pcg64-float  the same float path on numpy's default PCG64, for reference

Target: exact <= 2 x float. Also, at the smallest and largest epsilon a configuration
accepts (pseo_das/epsilon.py): the exact sampler's table (thresholds, memory, time to build
it) and the time of 200,000 draws (docs/operate/troubleshooting.md, "Epsilon range").
Results: benchmarks/results/noise-<date>.json (result_file.py),
rendered in docs/develop/benchmarks.md.
"""
from __future__ import annotations

import argparse
import math
import sys
import time
from fractions import Fraction

import numpy as np
from randomgen import ChaCha

from pseo_das.epsilon import MAX_EPSILON, MIN_EPSILON
from pseo_das.tasks.privacy.discrete_laplace import inversion_table
from pseo_das.tasks.privacy.geometric import discrete_laplace_noise
from pseo_das.tasks.privacy.streams import stream_key
from result_file import Run, table

SEED = bytes(range(32))


def float_path(generator: np.random.Generator, epsilon: float, draws: int) -> np.ndarray:
    p = -math.expm1(-epsilon)
    return generator.geometric(p, draws) - generator.geometric(p, draws)


def chacha_generator(tabulation_id: str) -> np.random.Generator:
    key = int.from_bytes(stream_key(SEED, tabulation_id), "little")
    return np.random.Generator(ChaCha(key=key, counter=0, rounds=20))


def best_ns_per_draw(run, draws: int, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        run()
        times.append(time.perf_counter() - started)
    return min(times) / draws * 1e9


def range_bounds(draws: int = 200_000) -> list[list]:
    """The exact sampler at the accepted range's bounds: epsilon, thresholds, table MB, seconds
    to build the table (not the cached one) and to draw `draws`."""
    rows = []
    for epsilon in (MIN_EPSILON, MAX_EPSILON):
        started = time.perf_counter()
        built = inversion_table.__wrapped__(epsilon)
        build = time.perf_counter() - started
        size = (sum(map(sys.getsizeof, built.thresholds)) + sys.getsizeof(built.thresholds)
                + built.ascending.nbytes)
        started = time.perf_counter()
        discrete_laplace_noise(SEED, "bounds", epsilon, (draws,))
        rows.append([f"{float(epsilon):g}", len(built.thresholds), round(size / 1e6, 1),
                     round(build, 2), round(time.perf_counter() - started, 2)])
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--draws", type=int, default=20_000_000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    run = Run("noise")
    n, rows = args.draws, []
    for epsilon in ("1", "1.5"):
        exact = Fraction(epsilon)
        figures = {
            "exact": best_ns_per_draw(
                lambda: discrete_laplace_noise(SEED, "bench", exact, (n,)), n, args.repeat),
            "float": best_ns_per_draw(
                lambda: float_path(chacha_generator("bench"), float(exact), n), n, args.repeat),
            "pcg64-float": best_ns_per_draw(
                lambda: float_path(np.random.default_rng(1), float(exact), n), n, args.repeat),
        }
        figures["exact / float"] = figures["exact"] / figures["float"]
        rows.append({"epsilon": epsilon, **figures})
        print(f"epsilon {epsilon}: exact {figures['exact']:.1f} ns/draw, float (ChaCha20) "
              f"{figures['float']:.1f}, float (PCG64) {figures['pcg64-float']:.1f}; "
              f"exact / float = {figures['exact / float']:.2f} (target <= 2)")
    columns = ["exact", "float", "pcg64-float", "exact / float"]
    out = run.write([table(f"ns per draw, best of {args.repeat}, {n:,} draws",
                           ["epsilon", "exact (ns/draw)", "float, ChaCha20 (ns/draw)",
                            "float, PCG64 (ns/draw)", "exact / float"],
                           [[row["epsilon"], *(round(row[c], 2 if c == "exact / float" else 1)
                                               for c in columns)] for row in rows]),
                     table("The exact sampler at the bounds of the accepted epsilon range",
                           ["epsilon", "thresholds", "table MB", "table built in s",
                            "200,000 draws in s"], range_bounds())],
                    details={"draws": n, "repeat": args.repeat, "rows": rows})
    print(f"results: {out}")


if __name__ == "__main__":
    main()
