"""Epsilons as exact rationals: what the configuration says (1.5 -> 3/2, 0.1 -> 1/10), summed
and compared without rounding, and written back as the decimal (or fraction) they are.
Privacy cost: none."""
from __future__ import annotations

from decimal import Decimal, InvalidOperation
from fractions import Fraction

# The epsilons a release configuration (and `noise-sample`) accepts for one measurement,
# checked when the configuration is loaded, before anything is recorded or drawn. The exact
# sampler (tasks/privacy/discrete_laplace.py) keeps a table of about 128 ln 2 / epsilon
# thresholds (its noise has sensitivity 1: one graduate, one count): at the minimum 88,722
# of them, 3.9 MB built in 0.1 s (tests/test_discrete_laplace.py measures it);
# at 1e-6 it would be 89 million (minutes and gigabytes), at 5e-324 without end. Above the
# maximum the first threshold e^-epsilon 2^64 nears 1 and every draw would leave the
# table for the slow exact path (at 45 the table has one entry).
MIN_EPSILON = Fraction(1, 1000)
MAX_EPSILON = Fraction(20)
MAX_TOTAL_EPSILON = Fraction(1000)   # a release's cap (privacy.epsilon_cap)


def epsilon_range_problem(value: float | int | str | Decimal | Fraction,
                          largest: Fraction = MAX_EPSILON) -> str | None:
    """Why `value` cannot be an epsilon (of one measurement; of a release's cap with
    `largest` = MAX_TOTAL_EPSILON), or None. A decimal is compared as it is (its exponent
    may be too large to build the exact value)."""
    epsilon = value if isinstance(value, Decimal) else exact_epsilon(value)
    if MIN_EPSILON <= epsilon <= largest:
        return None
    why = "; below it the exact sampler's table grows without bound" \
        if epsilon < MIN_EPSILON else ""
    return (f"outside the accepted range {epsilon_text(MIN_EPSILON)} to "
            f"{epsilon_text(largest)}{why} (docs/operate/troubleshooting.md, \"Limits checked "
            "before anything is spent\")")


def epsilon_from_text(text: str) -> Fraction:
    """An epsilon written as a decimal (1.5, 1e-3) or a fraction (3/2), exactly. ValueError
    if it is not a positive number; a decimal's exponent is bounded before the exact value
    is built (Fraction("1e-99999999") alone takes seconds and a 40 MB integer)."""
    try:
        decimal = Decimal(text)
        if not decimal.is_finite() or not -400 <= decimal.adjusted() <= 400:
            raise ValueError(f"{text!r} is not a number of a usable size")
    except InvalidOperation:
        pass                                  # a fraction such as 3/2
    try:
        value = Fraction(text)
    except (ValueError, ZeroDivisionError):
        raise ValueError(f"{text!r} is not an exact number") from None
    if value <= 0:
        raise ValueError(f"{text!r} is not positive")
    return value


def exact_epsilon(value: float | int | str | Decimal | Fraction) -> Fraction:
    """The exact rational an epsilon is written as. A float is taken as its shortest
    decimal representation (repr), which is the decimal it was written as whenever that
    decimal fits a double (a configuration refuses the others)."""
    if isinstance(value, Fraction):
        return value
    if isinstance(value, bool):
        raise TypeError("an epsilon is a number, not a boolean")
    if isinstance(value, (int, str, Decimal)):
        return Fraction(value)
    return Fraction(repr(float(value)))      # floats, numpy floats


def epsilon_text(value: Fraction | float | int | str) -> str:
    """An exact epsilon as a decimal string when it has one ('7.5', '0.00000000000000000001'),
    else 'p/q'."""
    value = exact_epsilon(value)
    denominator = value.denominator
    for prime in (2, 5):
        while denominator % prime == 0:
            denominator //= prime
    if denominator != 1:
        return f"{value.numerator}/{value.denominator}"
    digits = 0
    while (value * 10 ** digits).denominator != 1:
        digits += 1
    sign, magnitude = ("-", -value) if value < 0 else ("", value)
    text = f"{magnitude.numerator * 10 ** digits // magnitude.denominator}"
    if digits:
        text = text.rjust(digits + 1, "0")
        text = f"{text[:-digits]}.{text[-digits:]}"
    return sign + text
