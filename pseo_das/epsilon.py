"""Epsilons as exact rationals: what the configuration says (1.5 -> 3/2, 0.1 -> 1/10), summed
and compared without rounding, and written back as the decimal (or fraction) they are.
Privacy cost: none."""
from __future__ import annotations

from fractions import Fraction


def exact_epsilon(value: float | int | str | Fraction) -> Fraction:
    """The exact rational an epsilon is written as. A float is taken as its shortest
    decimal representation (repr), which is the decimal the configuration gave whenever
    that decimal fits a double (the configuration refuses the others)."""
    if isinstance(value, Fraction):
        return value
    if isinstance(value, bool):
        raise TypeError("an epsilon is a number, not a boolean")
    if isinstance(value, (int, str)):
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
