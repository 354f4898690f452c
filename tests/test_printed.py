"""The helpers that read printed numbers back (tests/printed.py) parse whole numbers: a prefix
of the expected figure is not taken for it."""

import pytest
from printed import assert_rounded, number, printed_number, printed_numbers, printed_row

LABEL = "largest |dS| or |P| above the diagonal:"


def test_a_printed_figure_is_read_whole():
    assert printed_number(f"loss 2.6036; {LABEL} 0\n", LABEL) == 0.0
    assert printed_number(f"{LABEL} 0.0\n", LABEL) == 0.0
    assert printed_number(f"{LABEL} 0.535\n", LABEL) == 0.535  # once "…: 0" matched it
    assert printed_number(f"{LABEL} 0.0123\n", LABEL) == 0.0123  # once "…: 0.0" matched it
    assert printed_number(f"{LABEL} 1e-05", LABEL) == 1e-05
    assert printed_numbers("factor 2 (a)\nfactor 2.5 (b)\n", "factor") == [2.0, 2.5]
    assert printed_row("bytes growing with T²     1,135,168      0.5\n",
                       "bytes growing with T²") == [1135168.0, 0.5]
    assert number("-2,345") == -2345.0 and number("nan") != number("nan")


def test_what_is_not_one_number_is_an_error():
    with pytest.raises(AssertionError, match="expected a number"):
        number("0.0,")  # a figure run into the next word is not taken for 0.0
    with pytest.raises(AssertionError, match="expected a number"):
        number("0,")
    with pytest.raises(AssertionError, match="expected a number"):
        printed_row("accuracy: 0.9 of 10\n", "accuracy:")
    with pytest.raises(AssertionError, match="printed 2 times"):
        printed_number(f"{LABEL} 0\n{LABEL} 0\n", LABEL)
    with pytest.raises(AssertionError, match="printed 0 times"):
        printed_number("nothing here", LABEL)


def test_rounded_figures_are_within_half_a_unit_of_their_last_digit():
    assert_rounded(1.2346e-3, 1.23456e-3, 5)
    assert_rounded(1.0000e1, 9.99996, 5)
    with pytest.raises(AssertionError):
        assert_rounded(1.2347e-3, 1.23456e-3, 5)
    with pytest.raises(AssertionError):
        assert_rounded(1.0e-3, 0.0, 5)
