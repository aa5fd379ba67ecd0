"""The one number formatter of the report's pages and the terminal summary (``report.format.number``) and the CSV
cell formatter beside it, against hand-written text."""

from __future__ import annotations

import math

import pytest

from medfuzz.report.format import MISSING, csv_cell, display, html_page, number, p_value, safe_cell

NAN = math.nan


@pytest.mark.parametrize(("args", "kwargs", "text"), [
    ((0.5,), {}, "0.500"),
    ((0.12345,), {"se": 0.0456}, "0.123 ± 0.046"),
    ((0.25,), {"interval": (0.1, 0.45), "k": 3, "n": 12}, "0.250 [0.100, 0.450] (3/12)"),
    ((0.52,), {"se": 0.044, "n": 40, "spec": ".2f"}, "0.52 ± 0.04 (n=40)"),
    ((0.425,), {"interval": (0.301, 0.559), "spec": ".1f", "scale": 100.0}, "42.5 [30.1, 55.9]"),
    ((0.4,), {"interval": (0.1687, 0.6873), "spec": ".0%"}, "40% [17%, 69%]"),
    ((0.000123456,), {"spec": ".4g"}, "0.0001235"),
    ((5440,), {"spec": ","}, "5,440"),
    ((2.0,), {"trim": True}, "2"),
    ((0.5,), {"se": 0.25, "trim": True}, "0.5 ± 0.25"),
    ((1,), {}, "1.000"),  # an int proportion reads as one
])
def test_a_number_reads_as_written_by_hand(args: tuple, kwargs: dict, text: str) -> None:
    assert number(*args, **kwargs) == text


@pytest.mark.parametrize("missing", [None, NAN])
@pytest.mark.parametrize("kwargs", [{}, {"se": 0.1}, {"interval": (0.1, 0.2), "k": 1, "n": 4}, {"spec": ".4g"},
                                    {"spec": ".0%", "scale": 100.0}, {"trim": True}, {"n": 3}])
def test_a_missing_value_is_one_dash_whatever_comes_with_it(missing: float | None, kwargs: dict) -> None:
    assert number(missing, **kwargs) == MISSING == "–"


@pytest.mark.parametrize("se", [None, NAN])
def test_a_missing_se_or_interval_end_is_left_out_not_printed(se: float | None) -> None:
    assert number(0.5, se=se) == "0.500"
    assert number(0.5, interval=(NAN, 0.7)) == "0.500"
    assert number(0.5, interval=(0.3, None)) == "0.500"  # type: ignore[arg-type]


def test_every_proportion_on_a_grid_keeps_its_digits() -> None:
    """Over [0, 1] in steps of 1/1000 (the domain of every proportion shown): three decimals, parseable back to
    within half a unit in the last place, with the SE and interval in the same digits."""
    for i in range(1001):
        value = i / 1000
        text = number(value, se=value / 2, interval=(value / 3, value))
        head, se = text.split(" [")[0], text.split(" ± ")[1]
        assert abs(float(head) - value) <= 5e-4 + 1e-12 and len(head.split(".")[1]) == 3  # + binary rounding
        assert abs(float(se) - value / 2) <= 5e-4 + 1e-12 and len(se.split(".")[1]) == 3


def test_the_run_card_cells_trim_count_and_say_yes() -> None:
    assert display((0.5, 0.25)) == "0.5 ± 0.25"
    assert display((NAN, 0.1)) == MISSING
    assert display((0.5, NAN)) == "0.5"
    assert display(1234567) == "1,234,567" and display(0.1234) == "0.123" and display(3.0) == "3"
    assert display(True) == "yes" and display(None) == MISSING and display([]) == MISSING


@pytest.mark.parametrize(("value", "cell"), [
    (0.123456, "0.1235"), (None, ""), (3, "3"), ("=HYPERLINK(1)", "'=HYPERLINK(1)"), ("-0.25", "-0.25"),
    (NAN, "nan"), ("untested: too few controls", "untested: too few controls"), ("@x", "'@x"),
])
def test_a_csv_cell_keeps_its_precision_and_is_spreadsheet_safe(value: object, cell: str) -> None:
    assert csv_cell(value) == cell


def test_safe_cell_leaves_numbers_and_quotes_formulas() -> None:
    assert safe_cell(-1) == -1 and safe_cell(None) is None and safe_cell("+1e3") == "+1e3"
    assert safe_cell("+cmd") == "'+cmd" and safe_cell("\tx") == "'\tx"


def test_every_page_is_one_shape() -> None:
    page = html_page("a <b>", "<p>x</p>", "mark{}")
    assert page.startswith("<!doctype html><html lang=en><head><meta charset=utf-8><meta name=viewport")
    assert "<title>a &lt;b&gt;</title>" in page and "mark{}</style>" in page
    assert page.endswith("<body><p>x</p></body></html>")


def test_a_p_value_keeps_four_significant_digits_or_says_why_it_is_missing() -> None:
    assert p_value(0.0909090) == "0.09091" and p_value(1.0) == "1" and p_value(3.2e-5) == "3.2e-05"
    assert p_value(None) == MISSING and p_value(NAN, "untested: too few controls") == "untested: too few controls"
