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
- mean of (p-hat - c0)² against its planted value Var(q) / 5 (normal): a p-hat that ignores the
  log-probabilities when present has the Bernoulli spread, ~40 times larger.
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
from medfuzz.validation.checks import Check, count_check, mean_check, normal_power, with_power
from medfuzz.validation.items import synthetic_items
from medfuzz.validation.medfuzz import JITTER_GRID

METHOD = "MedFuzz p-hat"


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
        # spread: E[(p-hat - c0)²] = Var(p-hat); Var((p-hat - c0)²) = Var(p-hat)² (2 + excess kurtosis of p-hat):
        # -1.2/5 for a mean of 5 uniform jitters (log-probabilities), (1 - 6 c0 (1 - c0)) / (5 c0 (1 - c0)) for a
        # mean of 5 Bernoulli draws
        excess = (np.full(len(items), -1.2 / draws) if logprobs
                  else (1 - 6 * c0 * (1 - c0)) / (draws * np.maximum(c0 * (1 - c0), 1e-12)))
        se_square = math.sqrt(float(np.sum(var_hat**2 * (2 + excess)))) / len(items)
        spread = mean_check(METHOD, f"default dialog p-hat, {label}: mean of (p-hat - E[q])²", float(var_hat.mean()),
                            float(np.nanmean(diff**2)), se_square, len(items), lowest=0.0, highest=1.0,
                            note=f"Var(p-hat) = {'Var(q)' if logprobs else 'E[q](1 - E[q])'}/{draws}")
        if logprobs:  # under the defect the spread is the Bernoulli one
            bernoulli = c0 * (1 - c0) / draws
            excess_b = (1 - 6 * c0 * (1 - c0)) / (draws * np.maximum(c0 * (1 - c0), 1e-12))
            checks.append(with_power(spread, "p-hat ignoring the log-probabilities (sampled letters only)",
                                     normal_power(spread, float(bernoulli.mean()),
                                                  math.sqrt(float(np.mean(bernoulli**2 * (2 + excess_b)))))))
        else:  # one draw instead of the 5 (the option orders not averaged): the spread of a single Bernoulli
            single = c0 * (1 - c0)
            excess_1 = (1 - 6 * single) / np.maximum(single, 1e-12)
            checks.append(with_power(spread, "one draw instead of 5 (the option orders not averaged)",
                                     normal_power(spread, float(single.mean()),
                                                  math.sqrt(float(np.mean(single**2 * (2 + excess_1)))))))
    return checks
