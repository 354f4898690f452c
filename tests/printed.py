"""Numbers read back from printed output.

A test that checks a printed figure parses it and compares the number: a substring or prefix
check would let a printed ``0.535`` or ``0.0123`` pass for an expected ``0``, and ``12,345 B``
pass for an expected ``2,345 B``.
"""

from __future__ import annotations

import math
import re

# a whole printed number: sign, digits (thousands commas before groups of three), fraction,
# exponent
NUMBER = (r"[-+]?(?:(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?"
          r"|[-+]?(?:inf|nan)")
_WHOLE = re.compile(rf"(?:{NUMBER})")


def number(token: str) -> float:
    """``token`` as a float; the whole token must be one number (``135,168``, ``1.5e-03``)."""
    if not _WHOLE.fullmatch(token):
        raise AssertionError(f"expected a number, found {token!r}")
    return float(token.replace(",", ""))


def printed_numbers(text: str, label: str) -> list[float]:
    """The number printed right after each occurrence of ``label`` in ``text``.

    Each is the whole whitespace-delimited token after the label: a printed ``0.0123`` reads
    as 0.0123, never as 0 or 0.0."""
    return [number(token) for token in re.findall(re.escape(label) + r"[ \t]*(\S+)", text)]


def printed_number(text: str, label: str) -> float:
    """The number printed right after ``label``, which must occur exactly once in ``text``."""
    found = printed_numbers(text, label)
    assert len(found) == 1, f"{label!r} is printed {len(found)} times, expected once:\n{text}"
    return found[0]


def printed_row(text: str, label: str) -> list[float]:
    """Every number after ``label`` on the one line of ``text`` that contains it (each token
    after the label must be a whole number: a table row's cells, or a figure ending a line)."""
    lines = [line for line in text.splitlines() if label in line]
    assert len(lines) == 1, f"{len(lines)} lines contain {label!r}, expected one:\n{text}"
    return [number(token) for token in lines[0].split(label, 1)[1].split()]


def rounds_to(printed: float, value: float, significant: int) -> bool:
    """Whether ``printed`` is ``value`` written with ``significant`` significant digits: they
    differ by at most half a unit in the last printed digit."""
    if value == 0:
        return printed == 0
    unit = 10.0 ** (math.floor(math.log10(abs(value))) - significant + 1)
    return abs(printed - value) <= 0.5 * unit * (1 + 1e-9)


def assert_rounded(printed: float, value: float, significant: int) -> None:
    """``printed`` is ``value`` rounded to ``significant`` significant digits."""
    assert rounds_to(printed, value, significant), (printed, value, significant)
