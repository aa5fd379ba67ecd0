"""shap's Partition explainer against exact values computed here from every coalition of a toy game.

The game is the one shap plays: a coalition S keeps the tokens in S and the text masker replaces the rest, and the
toy model scores the masked text. Exact Shapley values come from all 2^n coalitions (itertools); exact Owen values
(what the Partition explainer estimates: Shapley values nested along the masker's binary token hierarchy) from
all coalitions of the siblings along each token's path. On a game whose interactions stay inside the hierarchy's
clusters the two coincide and shap must match the Shapley values; on a game with an interaction across clusters
they differ, and shap must match the Owen values.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

shap = pytest.importorskip("shap", reason="explanations need the 'explain' extra (shap)")

from medfuzz.solvers.tces.explain.shapley import shapley_values  # noqa: E402

TEXT = "alpha beta, gamma delta. eps"
WORDS = ["alpha", "beta", "gamma", "delta", "eps"]
WEIGHTS = dict(zip(WORDS, [1.0, -2.0, 0.5, 3.0, 0.25], strict=True))


def _present(text: str) -> set[str]:
    return set(text.replace(",", " ").replace(".", " ").split())


def additive_game(strings: np.ndarray) -> np.ndarray:
    """Weights plus interactions inside clusters only (alpha·beta, gamma·delta), two outputs."""
    rows = []
    for s in strings:
        present = _present(s)
        value = sum(WEIGHTS[w] for w in WORDS if w in present)
        value += 4.0 * ("alpha" in present and "beta" in present) + 1.5 * ("gamma" in present and "delta" in present)
        rows.append([value, -2 * value])
    return np.array(rows)


def crossing_game(strings: np.ndarray) -> np.ndarray:
    """Adds a three-way interaction across the (alpha beta) and (gamma delta) clusters: Owen ≠ Shapley."""
    rows = []
    for s in strings:
        present = _present(s)
        base = additive_game(np.array([s]))[0, 0]
        rows.append([base + 6.0 * ({"alpha", "gamma", "delta"} <= present)])
    return np.array(rows)


def _value(game, masker, coalition: set[int], n: int, output: int) -> float:
    mask = np.zeros(n, dtype=bool)
    mask[list(coalition)] = True
    return float(game(masker(mask, TEXT)[0])[0, output])


def exact_shapley(game, masker, n: int, output: int = 0) -> np.ndarray:
    phi = np.zeros(n)
    for i in range(n):
        others = [j for j in range(n) if j != i]
        for size in range(n):
            weight = math.factorial(size) * math.factorial(n - size - 1) / math.factorial(n)
            for subset in itertools.combinations(others, size):
                s = set(subset)
                phi[i] += weight * (_value(game, masker, s | {i}, n, output) - _value(game, masker, s, n, output))
    return phi


def exact_owen(game, masker, n: int, output: int = 0) -> np.ndarray:
    """Owen values for the masker's binary hierarchy: at each split along a token's path the sibling cluster is
    in or out with weight 1/2 each (two-player Shapley weights), all 2^depth combinations enumerated."""
    tree = masker.clustering(TEXT)
    leaves: dict[int, set[int]] = {i: {i} for i in range(n)}
    parent: dict[int, tuple[int, int]] = {}  # child -> (parent node, sibling node)
    for row, (left, right, *_ ) in enumerate(tree):
        node, left, right = n + row, int(left), int(right)
        leaves[node] = leaves[left] | leaves[right]
        parent[left], parent[right] = (node, right), (node, left)
    phi = np.zeros(n)
    for i in range(n):
        siblings, node = [], i
        while node in parent:
            node, sibling = parent[node][0], parent[node][1]
            siblings.append(leaves[sibling])
        for chosen in itertools.product((False, True), repeat=len(siblings)):
            s = set().union(*(group for group, on in zip(siblings, chosen, strict=True) if on))
            delta = _value(game, masker, s | {i}, n, output) - _value(game, masker, s, n, output)
            phi[i] += delta / 2 ** len(siblings)
    return phi


def _explain(game, outputs: list[str]):
    masker = shap.maskers.Text(r"\W+")
    return masker, shapley_values(TEXT, game, masker, outputs, max_evals=10_000, batch_size=4, seed=0)


def test_partition_matches_exact_shapley_when_interactions_stay_inside_clusters() -> None:
    masker, attribution = _explain(additive_game, ["v", "-2v"])
    assert [t.strip(" ,.") for t in attribution.tokens] == WORDS
    for output in (0, 1):
        exact = exact_shapley(additive_game, masker, len(WORDS), output)
        np.testing.assert_allclose(attribution.values[:, output], exact, atol=1e-9)
    # efficiency: the values add up to f(text) − f(all masked)
    np.testing.assert_allclose(attribution.base + attribution.values.sum(0), attribution.full, atol=1e-9)
    np.testing.assert_allclose(attribution.full, additive_game(np.array([TEXT]))[0], atol=1e-9)


def test_partition_gives_owen_values_across_clusters() -> None:
    masker, attribution = _explain(crossing_game, ["v"])
    n = len(WORDS)
    owen, shapley = exact_owen(crossing_game, masker, n), exact_shapley(crossing_game, masker, n)
    np.testing.assert_allclose(attribution.values[:, 0], owen, atol=1e-9)
    # the three-way term splits 1/2 to the (alpha beta) cluster and 1/4 each to gamma, delta, not 1/3 each
    np.testing.assert_allclose(owen - shapley, [6 * (1 / 2 - 1 / 3), 0, 6 * (1 / 4 - 1 / 3), 6 * (1 / 4 - 1 / 3), 0],
                               atol=1e-9)


def test_a_small_budget_still_adds_up_and_is_seeded() -> None:
    masker = shap.maskers.Text(r"\W+")
    first = shapley_values(TEXT, crossing_game, masker, ["v"], max_evals=6, batch_size=2, seed=3)
    again = shapley_values(TEXT, crossing_game, masker, ["v"], max_evals=6, batch_size=2, seed=3)
    np.testing.assert_array_equal(first.values, again.values)
    np.testing.assert_allclose(first.base + first.values.sum(0), first.full, atol=1e-9)
    assert first.spans[0] == (0, len("alpha ")) and TEXT[slice(*first.spans[-1])] == "eps"
