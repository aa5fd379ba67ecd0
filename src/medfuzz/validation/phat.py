"""The default p-hat estimator: ``solvers.medfuzz.controls.estimate_p`` with the default configuration (the full
target dialog per draw, 5 option orders, 2 in-context exemplars per draw), on the planted target, with its
letter log-probabilities present and absent.

The planted rule (restated): each call's P(key) is q = clip(b + σU, 0, 1), U ~ Uniform(-1, 1), fresh per call.
A draw's value is P(key) read from the letter log-probabilities (so q itself) when they are present, else 1 if
the sampled letter is the key (a Bernoulli(q) draw). p-hat is the mean over the 5 draws, so for an item with
base b: E[p-hat] = c0 = E[q] either way, and Var(p-hat) = Var(q) / 5 with log-probabilities (small: σ²/15
unclipped) and c0 (1 - c0) / 5 without. The checks, over the items:

- the draws that read log-probabilities: all of them when present, none when absent (exact);
- mean of (p-hat - c0) (normal, both cases): a p-hat of the wrong letter (the option's letter before the
  shuffle) is far off;
- mean of (p-hat - c0)² against its planted value Var(q) / 5: a p-hat that ignores the log-probabilities when
  present has the Bernoulli spread, ~40 times larger. Its interval is the central 99.9 % of the statistic over
  simulated runs of the planted rule (``SPREAD_RUNS``), not a normal one: a mean of squared Bernoulli-mean
  deviations is right-skewed, and the normal interval failed the correct estimator at full size (seed 0:
  0.04593 against [0.02265, 0.04555]; 16 seeds gave z-scores of sd 1.16 with that one at 3.4). The power
  against each defect is the share of simulated runs under it that fall outside.
"""

from __future__ import annotations

import asyncio
import dataclasses
import math
from collections.abc import Sequence

import numpy as np

from medfuzz.benchmarks.items import MCQItem, derive_seed
from medfuzz.models.protocol import ChatMessage, Generation, UsageLedger
from medfuzz.planted import PlantedChatModel, PlantedSpec, PlantedTarget
from medfuzz.solvers.medfuzz.config import MedFuzzConfig
from medfuzz.solvers.medfuzz.controls import Estimate, estimate_p, make_draws
from medfuzz.solvers.medfuzz.target import TargetDialog
from medfuzz.validation.checks import LEVEL, Check, count_check, mean_check, normal_power, with_power
from medfuzz.validation.items import synthetic_items
from medfuzz.validation.medfuzz import JITTER_GRID

METHOD = "MedFuzz p-hat"
SPREAD_RUNS = 20_000  # simulated runs behind the spread check's interval and its power


class WithoutLogprobs:
    """A model that answers like ``model`` but returns no letter log-probabilities (a chat API without them)."""

    def __init__(self, model: PlantedChatModel) -> None:
        self.model = model
        self.name = model.name

    async def generate(self, messages: Sequence[ChatMessage], *, max_tokens: int = 512,
                       temperature: float | None = None, seed: int | None = None,
                       letters: Sequence[str] | None = None) -> Generation:
        out = await self.model.generate(messages, max_tokens=max_tokens, temperature=temperature, seed=seed,
                                        letters=letters)
        return dataclasses.replace(out, letter_logprobs=None)


def key_moments(b: float, sigma: float) -> tuple[float, float]:
    """(E[q], Var(q)) for q = clip(b + σU, 0, 1)."""
    q = np.clip(b + sigma * JITTER_GRID, 0.0, 1.0)
    return float(q.mean()), float(q.var())


def simulated_spread(rng: np.random.Generator, base: np.ndarray, c0: np.ndarray, sigma: float, draws: int,
                     bernoulli: bool) -> np.ndarray:
    """``SPREAD_RUNS`` values of the mean over items of (p-hat - c0)² under the planted rule: each draw's
    q = clip(b + σU, 0, 1), read as q or as a Bernoulli(q) letter, p-hat the mean of ``draws`` of them. Items
    are taken in blocks so the arrays stay small."""
    out = np.zeros(SPREAD_RUNS)
    for start in range(0, len(base), 20):
        b, c = base[start:start + 20], c0[start:start + 20]
        q = np.clip(b[None, :, None] + sigma * rng.uniform(-1.0, 1.0, (SPREAD_RUNS, len(b), draws)), 0.0, 1.0)
        values = (rng.random(q.shape) < q).astype(np.float64) if bernoulli else q
        out += ((values.mean(axis=2) - c[None, :]) ** 2).sum(axis=1)
    return out / len(base)


def estimates(model: object, items: Sequence[MCQItem], pool: Sequence[MCQItem], config: MedFuzzConfig,
              seed: int) -> list[Estimate]:
    dialog = TargetDialog(model, config, pool)  # type: ignore[arg-type]

    async def main() -> list[Estimate]:
        return list(await asyncio.gather(*(
            estimate_p(dialog, item, make_draws(dialog, item, derive_seed(seed, "p-hat", item.id)), UsageLedger())
            for item in items)))

    return asyncio.run(main())


def phat_checks(n: int = 60, seed: int = 0, spec: PlantedSpec | None = None) -> list[Check]:
    spec = (spec or PlantedSpec.load()).with_target(data="none")
    items = synthetic_items(n, seed=seed + 7)
    pool = synthetic_items(20, seed=seed + 8)  # the exemplars: other items the target also knows
    planted = PlantedTarget(spec, [*items, *pool])
    config = MedFuzzConfig(seed=seed)  # the defaults: dialog prompt, 5 option orders, 2 exemplars
    draws = max(1, config.option_orders)
    sigma = spec.target.noise
    moments = [key_moments(planted.base[item.id], sigma) for item in items]
    c0 = np.array([m for m, _ in moments])
    var_q = np.array([v for _, v in moments])
    checks: list[Check] = []
    for label, model, logprobs in (("log-probabilities present", PlantedChatModel(planted, spec.name), True),
                                   ("log-probabilities absent", WithoutLogprobs(PlantedChatModel(planted, spec.name)),
                                    False)):
        found = estimates(model, items, pool, config, seed)
        hats = np.array([e.p_hat if e.p_hat is not None else math.nan for e in found])
        read = sum(e.logprob_draws for e in found)
        wrong_kind = (len(items) * draws - read) if logprobs else read
        checks.append(count_check(METHOD, f"default dialog p-hat, {label}: draws not read as expected "
                                          f"({'log-probabilities' if logprobs else 'sampled letters'})",
                                  wrong_kind + int(np.isnan(hats).sum()), len(items) * draws,
                                  note=f"{draws} option orders, {config.exemplars} exemplars, "
                                       f"pvalue_prompt={config.pvalue_prompt}"))
        per_draw = var_q if logprobs else c0 * (1 - c0)
        var_hat = per_draw / draws  # Var(p-hat) per item
        diff = hats - c0
        se = math.sqrt(float(var_hat.sum())) / len(items)
        mean = mean_check(METHOD, f"default dialog p-hat, {label}: mean of (p-hat - E[q])", 0.0,
                          float(np.nanmean(diff)), se, len(items), lowest=-1.0, highest=1.0,
                          note="E[p-hat] = E[q] of the planted rule")
        # the wrong letter (the letter before the shuffle): with k options the key is shown under its own letter
        # about 1 time in k, so E[p-hat] falls to about c0 / k + (k - 1) / k * (1 - c0) / (k - 1) = 1 / k
        k = np.array([len(item.options) for item in items])
        checks.append(with_power(mean, "p-hat of the wrong letter (before the option shuffle)",
                                 normal_power(mean, float(np.mean(1 / k - c0)), math.sqrt(float(var_hat.mean())))))
        # spread: the mean over items of (p-hat - c0)², against the same statistic over simulated runs of the
        # planted rule (draws as the estimator reads them: q itself, or a Bernoulli(q) letter); the defects
        # simulated alike (the Bernoulli spread when log-probabilities are present, one draw when absent)
        rng = np.random.default_rng(derive_seed(seed, "p-hat spread", label))
        base = np.array([planted.base[item.id] for item in items])
        simulated = simulated_spread(rng, base, c0, sigma, draws, bernoulli=not logprobs)
        tail = (1 - LEVEL) / 2
        low, high = np.quantile(simulated, [tail, 1 - tail])
        spread = Check(METHOD, f"default dialog p-hat, {label}: mean of (p-hat - E[q])²", float(var_hat.mean()),
                       float(np.nanmean(diff**2)), float(low), float(high), len(items),
                       note=f"Var(p-hat) = {'Var(q)' if logprobs else 'E[q](1 - E[q])'}/{draws}; central {LEVEL:.1%} "
                            f"of {SPREAD_RUNS:,} simulated runs", lowest=0.0, highest=1.0)
        if logprobs:
            defect = "p-hat ignoring the log-probabilities (sampled letters only)"
            under = simulated_spread(rng, base, c0, sigma, draws, bernoulli=True)
        else:
            defect = "one draw instead of 5 (the option orders not averaged)"
            under = simulated_spread(rng, base, c0, sigma, 1, bernoulli=True)
        checks.append(with_power(spread, defect, float(np.mean((under < low) | (under > high)))))
    return checks
