"""``validate``'s surface section: the planted target through the real Inspect and lm-eval tasks and the real report,
each printed number of the clean baseline read back where users read it (Inspect metric, summary.json, model card,
terminal) and compared with an independent recount and the planted truth."""

from __future__ import annotations

import numpy as np
import pytest

from medfuzz.validation.checks import format_table, suite_errors
from medfuzz.validation.surfaces import planted_accuracy, planted_argmax_accuracy, surface_spec, validate_surfaces

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def checks():
    return validate_surfaces("ci")


def test_every_surface_check_passes_and_each_surface_is_read(checks) -> None:
    failed = [c for c in checks if not c.passed]
    assert not failed and not suite_errors(checks), "\n" + format_table(checks)
    names = " | ".join(c.statistic for c in checks)
    for where in ("Inspect's baseline_acc metric", "Inspect's baseline_stderr metric", "summary.json k",
                  "summary.json Wilson low", "summary.json Wilson high", "model card value", "model card Wilson low",
                  "terminal line", "lm-eval's acc =", "lm-eval's acc_stderr", "summary.json se", "model card stderr",
                  "Inspect clean baseline accuracy vs planted", "lm-eval clean baseline accuracy vs planted",
                  "3 shards merged = the whole run"):
        assert where in names, where
    # rates strictly inside (0, 1): every standard error and interval end is a real check, not 0 against 0
    measured = {c.statistic: c.measured for c in checks}
    assert 0 < measured["Inspect clean baseline accuracy: summary.json value = k/n"] < 1
    assert 0 < measured["lm-eval clean baseline accuracy: summary.json value = recount"] < 1
    assert all(c.power >= 0.8 for c in checks if c.defect)


def test_the_planted_accuracies_match_a_simulation_of_the_rule() -> None:
    """The closed forms against the rule simulated: q = clip(b + σU, 0, 1); sampled: E[q]; argmax: P(q > 1/4)."""
    from medfuzz.benchmarks import load_items
    from medfuzz.planted import PlantedTarget

    spec = surface_spec()
    target = PlantedTarget(spec, load_items("medqa", "demo"))
    ids = sorted(target.base)
    rng = np.random.default_rng(0)
    u = rng.uniform(-1, 1, size=(200_000, 1))
    q = np.clip(np.array([target.base[i] for i in ids])[None, :] + spec.target.noise * u, 0, 1)
    assert planted_accuracy(spec, ids) == pytest.approx(q.mean(), abs=2e-3)
    assert planted_argmax_accuracy(spec, ids) == pytest.approx((q > 0.25).mean(), abs=2e-3)
