"""The default p-hat estimator's checks (``validation/phat.py``): they pass on today's code, their planted
moments are right by hand, and a model without log-probabilities is read by sampled letters."""

from __future__ import annotations

import pytest

from medfuzz.validation.phat import key_moments, phat_checks


def test_key_moments_by_hand():
    # unclipped: q = b + σU, E = b, Var = σ²/3
    mean, var = key_moments(0.5, 0.06)
    assert mean == pytest.approx(0.5, abs=1e-9) and var == pytest.approx(0.06**2 / 3, rel=1e-6)
    # clipped at 1: q = clip(0.98 + 0.04 U): E = ∫ over U of min(1, 0.98 + 0.04u) du / 2
    mean, _ = key_moments(0.98, 0.04)
    # on u in (-1, 0.5) q = 0.98 + 0.04u (mean 0.97 over 3/4 of the mass), on (0.5, 1) q = 1
    assert mean == pytest.approx(0.75 * 0.97 + 0.25 * 1.0, abs=1e-6)


def test_the_default_p_hat_checks_pass_and_state_their_power():
    checks = phat_checks(n=30, seed=1)
    assert all(c.passed for c in checks), [(c.statistic, c.measured, c.low, c.high) for c in checks]
    assert len(checks) == 6
    statistical = [c for c in checks if c.low != c.high]
    assert len(statistical) == 4 and all(c.defect and c.power >= 0.8 for c in statistical)


@pytest.mark.parametrize("bernoulli", [False, True])
def test_the_simulated_spread_has_the_closed_form_mean_and_the_skew_of_a_sum_of_squares(bernoulli):
    """The spread check's interval comes from simulated runs: their mean is Var(p-hat) (Var(q)/5 read as q,
    E[q](1 - E[q])/5 as Bernoulli letters; item bases as the planted beta gives them), and the upper tail is
    longer than the lower (a normal interval failed the right estimator at full size)."""
    import numpy as np

    from medfuzz.validation.phat import SPREAD_RUNS, simulated_spread

    rng = np.random.default_rng(3)
    base = np.clip(rng.beta(6, 2, 200), 0.3, 0.95)
    moments = np.array([key_moments(b, 0.05) for b in base])
    c0, var_q = moments[:, 0], moments[:, 1]
    values = simulated_spread(np.random.default_rng(4), base, c0, 0.05, 5, bernoulli)
    expected = float(np.mean(c0 * (1 - c0) if bernoulli else var_q)) / 5
    assert len(values) == SPREAD_RUNS
    assert values.mean() == pytest.approx(expected, rel=4 * values.std() / expected / SPREAD_RUNS**0.5)
    low, middle, high = np.quantile(values, [0.0005, 0.5, 0.9995])
    assert high - middle > middle - low
