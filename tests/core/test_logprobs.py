from __future__ import annotations

import math

import pytest

from medfuzz.models.logprobs import (
    TokenLogprob,
    extract_letter_logprobs,
    letter_of_token,
    normalise,
)

ABCD = "ABCD"
L = math.log


@pytest.mark.parametrize(
    ("token", "letter"),
    [("A", "A"), (" A", "A"), ("A.", "A"), (" (B", "B"), ("C)", "C"), ("D:", "D"), ("\nB", "B"),
     ("a", None), (" An", None), ("E", None), ("AB", None), ("", None)],
)
def test_letter_of_token_variants(token, letter):
    assert letter_of_token(token, ABCD) == letter


def test_spellings_of_one_letter_add_up():
    position = TokenLogprob("A", L(0.5), top=[("A", L(0.5)), (" A", L(0.2)), ("B", L(0.1)), ("The", L(0.2))])
    found = extract_letter_logprobs([position], ABCD)
    assert found is not None
    assert math.exp(found["A"]) == pytest.approx(0.7)
    assert math.exp(found["B"]) == pytest.approx(0.1)
    assert "C" not in found and "D" not in found  # below the top-k cut-off: absent, not guessed


def test_eos_and_whitespace_first_are_skipped():
    positions = [
        TokenLogprob("</s>", L(0.9)),
        TokenLogprob("<|im_end|>", L(0.9)),
        TokenLogprob("\n", L(0.9)),
        TokenLogprob(" C", L(0.6), top=[(" C", L(0.6)), (" D", L(0.3))]),
    ]
    found = extract_letter_logprobs(positions, ABCD)
    assert found == {"C": pytest.approx(L(0.6)), "D": pytest.approx(L(0.3))}


@pytest.mark.parametrize("positions", [None, [], [TokenLogprob("</s>", 0.0)], [TokenLogprob("  ", -1.0)]])
def test_missing_logprobs_are_not_available(positions):
    assert extract_letter_logprobs(positions, ABCD) is None


def test_first_content_token_must_be_a_letter():
    positions = [TokenLogprob("The", L(0.5)), TokenLogprob(" answer", L(0.9)), TokenLogprob(" B", L(0.8))]
    assert extract_letter_logprobs(positions, ABCD, where="first") is None
    assert extract_letter_logprobs(positions, ABCD, where="last") == {"B": pytest.approx(L(0.8))}


def test_last_letter_after_reasoning():
    positions = [TokenLogprob("A", L(0.4)), TokenLogprob(" because", L(0.9)), TokenLogprob(" D", L(0.7),
                 top=[(" D", L(0.7)), (" A", L(0.2))])]
    found = extract_letter_logprobs(positions, ABCD, where="last")
    assert found == {"D": pytest.approx(L(0.7)), "A": pytest.approx(L(0.2))}


def test_normalise_over_letters():
    probs = normalise({"A": L(0.3), "B": L(0.1)}, ABCD)
    assert probs == {"A": pytest.approx(0.75), "B": pytest.approx(0.25), "C": 0.0, "D": 0.0}
    with pytest.raises(ValueError):
        normalise({}, ABCD)
