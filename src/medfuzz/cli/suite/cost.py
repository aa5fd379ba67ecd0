"""What a ``medfuzz run`` is expected to cost, printed beside its call bound before the first call (``--dry-run``
and the run's own start): calls and tokens per run and role, under three labelled assumptions (the fewest calls,
the expected, the most), and with prices per 1,000 tokens (``--price MODEL=IN/OUT``) the expected and worst-case
bill.

The estimate reads what the bound reads (``build.bound``: the built tasks' samples and each run's config from
``build.method_config``), never a level's numbers: the same config that gives ``max_calls`` gives K, the
replicates, the option orders, the p-hat prompt, the control policy and its batches, the retries and the token
budgets. What no setting says is assumed, each value named in the printed legend and replaceable by what the user
knows (``--expect accuracy=0.8,asr=0.2``):

- ``accuracy``: the target's clean accuracy (each MedFuzz replicate answers the original anew, at temperature 1);
- ``asr``: MedFuzz's attack success rate, the share of replicates answered right that the attack flips within K
  turns (the turn of a flip: ``turns_reached``);
- ``effective``: the share of successful MedFuzz attacks that are real effects, whose controls never come as far
  from p-hat of the original as the attack: they draw every control (M). A null attack stops at its first
  exceedance, which under exchangeable p-hats comes at control l with probability 1 / (l (l + 1)); how many
  controls that pays is replayed through the engine's own control loop (``MedFuzzConfig.control_schedule``,
  the growing batches of ``stats.next_control_batch``), so the estimate follows ``controls_policy`` and
  ``control_batch``;
- ``tces_asr``: TCES's ASR@B (a constant chance per query); items without an entity of the run's type in a
  distractor cost nothing (counted exactly, from the vocabulary's matcher);
- ``rejects``: the share of attacker replies rejected and asked again (malformed modified items, controls that
  drift in word count), within the config's tries;
- ``fill``: the share of each reply's token budget a reply uses; a reply with no budget (the clean baseline and
  MedGuard at the levels without ``max_tokens``) is counted at ``free_reply`` tokens.

Tokens are counted from the real prompts (``solvers.medfuzz.prompts``, the TCES and baseline prompts) at about 4
characters a token (English text; a model's own tokenizer differs by 10-30 %), dialogs growing turn by turn as the
engines grow them. Against planted runs at the paper level and at ``lean`` the expected calls are within 1.5x of
the calls paid per role (``bench/suite_cost_estimate.py``; docs/performance.md, P11).
"""

from __future__ import annotations

import math
import pkgutil
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from typing import Any

from medfuzz.cli.suite.cost_model import (
    CHARS_PER_TOKEN,
    FREE_MODELS,
    TARGET_ROLES,
    Assumptions,
    Costs,
    MedFuzzShapes,
    RoleCost,
    add_role_cost,
    mean_of,
    medfuzz_costs,
    medfuzz_worst,
    scenarios,
    spread,
    tces_costs,
    tokens,
)
from medfuzz.records.methods import METHODS

# ------------------------------------------------------------------------------------------------ the suite


@dataclass(frozen=True)
class RunEstimate:
    """One run's expected costs per scenario, and its worst case (the bound, each call at its largest)."""

    key: str  # the run's name in the bound (``plan.run_key``)
    model: str  # the target model
    method: str
    expected: dict[str, Costs]  # scenario label -> role -> cost
    worst: Costs
    note: str = ""  # how this run was estimated, when not from its method's model

    def calls(self, scenario: str) -> float:
        return sum(c.calls for c in self.expected[scenario].values())


@dataclass(frozen=True)
class SuiteEstimate:
    runs: list[RunEstimate]
    assumptions: tuple[Assumptions, ...]
    known: Mapping[str, float]
    attacker: str | None  # the attacker role's model (None: the target attacks itself)
    unbounded_replies: bool  # some reply has no max_tokens: the worst case counts it at the "most" free_reply

    def total(self, scenario: str) -> float:
        return sum(run.calls(scenario) for run in self.runs)

    def model_of(self, run: RunEstimate, role: str) -> str:
        return self.attacker if role not in TARGET_ROLES and self.attacker is not None else run.model

    def role_totals(self, scenario: str | None) -> dict[tuple[str, str], RoleCost]:
        """(model, role) -> cost, summed over runs; ``None``: the worst case."""
        out: dict[tuple[str, str], RoleCost] = {}
        for run in self.runs:
            for role, cost in (run.worst if scenario is None else run.expected[scenario]).items():
                key = (self.model_of(run, role), role)
                out[key] = out.get(key, RoleCost(0.0)) + cost
        return out

    def cost(self, scenario: str | None, prices: Mapping[str, tuple[float, float]]) -> tuple[float, list[str]]:
        """The bill under ``prices`` (per 1,000 tokens), and the paid models without a price."""
        total, missing = 0.0, []
        for (model, _), cost in self.role_totals(scenario).items():
            if model.startswith(FREE_MODELS):
                continue
            if model not in prices:
                missing.append(model)
                continue
            inp, out = prices[model]
            total += cost.tokens_in / 1000 * inp + cost.tokens_out / 1000 * out
        return total, sorted(set(missing))

    def lines(self, prices: Mapping[str, tuple[float, float]] | None = None) -> list[str]:
        low, mid, high = (s.label for s in self.assumptions)
        width = max((len(run.key) for run in self.runs), default=5)
        out = [f"Expected model calls ({mid}; from {low} to {high} in brackets; the assumptions below; the bound "
               "above holds whatever they are):"]
        for run in self.runs:
            roles = ", ".join(f"{role} {_n(cost.calls)}" for role, cost in run.expected[mid].items())
            ceiling = sum(c.calls for c in run.worst.values())
            spread = ("(as the bound)" if run.calls(low) == run.calls(high) == ceiling
                      else f"({_n(run.calls(low))} - {_n(run.calls(high))})")
            out.append(f"  {run.key:{width}s}  ~{_n(run.calls(mid)):>9s} calls {spread}  ({roles})"
                       f"{'  ' + run.note if run.note else ''}")
        exact = all(run.calls(low) == run.calls(high) == sum(c.calls for c in run.worst.values())
                    for run in self.runs)
        out.append(f"  {'total':{width}s}  ~{_n(self.total(mid)):>9s} calls "
                   + ("(as the bound)" if exact else f"({_n(self.total(low))} - {_n(self.total(high))})"))
        totals = {s: self.role_totals(s) for s in (low, mid, high)}
        worst = self.role_totals(None)
        for key in totals[mid]:
            model, role = key
            e, lo, hi, w = totals[mid][key], totals[low][key], totals[high][key], worst.get(key, RoleCost(0.0))
            out.append(f"  tokens, {role} ({model}): ~{_n(e.tokens_in)} in + {_n(e.tokens_out)} out "
                       f"({_n(lo.tokens_in + lo.tokens_out)} - {_n(hi.tokens_in + hi.tokens_out)} in all; worst "
                       f"case {_n(w.tokens_in + w.tokens_out)})")
        for scenario in self.assumptions:
            out.append(f"  assumed, {scenario.legend()}")
        if self.known:
            out.append("  known (--expect, the same in every scenario): "
                       + ", ".join(f"{k} {v:g}" for k, v in self.known.items()))
        else:
            out.append("  (--expect accuracy=A,asr=S replaces an assumption with what you know of the model)")
        out.append(f"  tokens at about {CHARS_PER_TOKEN:g} characters each, from the real prompts; worst case: the "
                   "bound's calls, each at its largest prompt with its whole budget"
                   + (" (a reply without max_tokens at the 'most' free_reply)" if self.unbounded_replies else ""))
        if prices:
            expected, missing = self.cost(mid, prices)
            lo_cost, _ = self.cost(low, prices)
            hi_cost, _ = self.cost(high, prices)
            worst_cost, _ = self.cost(None, prices)
            out.append(f"  cost (--price, per 1,000 tokens): expected {_money(expected)} ({_money(lo_cost)} - "
                       f"{_money(hi_cost)}); worst case {_money(worst_cost)}"
                       + (f"; no price for {', '.join(missing)} (not counted)" if missing else ""))
        return out


def _n(value: float) -> str:
    """A count as printed: rounded to 2-3 significant digits above 1,000."""
    if value >= 1e6:
        return f"{value / 1e6:.3g}M"
    if value >= 1000:
        digits = max(0, math.floor(math.log10(value)) - 2)
        return f"{round(value, -digits):,.0f}"
    return f"{value:.0f}" if value >= 10 or value == round(value) else f"{value:.1f}"


def _money(value: float) -> str:
    return f"{value:,.2f}" if value >= 1 else f"{value:.4f}"


def _sample_text(sample: Any) -> str:
    text = sample.input
    if isinstance(text, str):
        return text
    return "\n".join(getattr(m, "text", str(getattr(m, "content", ""))) for m in text)


@cache
def _items(task: Any) -> list[Any]:
    from medfuzz.benchmarks.items import MCQItem

    return [MCQItem.from_record(s.metadata["item"]) for s in task.dataset
            if isinstance((s.metadata or {}).get("item"), dict) and "options" in s.metadata["item"]]


def estimate(built: Sequence[tuple[Any, Any]], bound: Any, models: Sequence[str] = ("",), attacker: str | None = None,
             known: Mapping[str, float] | None = None, max_tokens: int | None = None) -> SuiteEstimate:
    """The expected cost of the runs ``build.bound`` bounded (``built``: (run, task) pairs; ``bound``: its
    ``Bound``, whose keys this follows); ``max_tokens``: the level's generate cap of plain answers."""
    from medfuzz.cli.suite.build import method_config
    from medfuzz.cli.suite.plan import run_key

    assumed = scenarios(known)
    runs: list[RunEstimate] = []
    unbounded = False
    for run, task in built:
        config = method_config(run)
        n = len(task.dataset)
        for model in models:
            key = run_key(run.label, model, several=len(models) > 1)
            ceiling = bound.per_run[key]
            spec = METHODS.get(run.method)
            if spec is not None and spec.cost_estimate is not None and config is not None:
                expected, worst, note = pkgutil.resolve_name(spec.cost_estimate)(config, task, n, ceiling, assumed)
            elif config is None:
                expected, worst, note = _one_call_each(task, ceiling, assumed, max_tokens)
                unbounded = unbounded or max_tokens is None
            else:  # another package's method whose config bounds its calls: its bound, as no model says more
                expected = {s.label: {role: RoleCost(c) for role, c in ceiling.items()} for s in assumed}
                worst, note = {role: RoleCost(c) for role, c in ceiling.items()}, "(its bound: no estimate known)"
            runs.append(RunEstimate(key, model, run.method, expected, worst, note))
    return SuiteEstimate(runs, assumed, dict(known or {}), attacker, unbounded)


def medfuzz_cost(config: Any, task: Any, n: int, ceiling: Mapping[str, int],
                 assumed: Sequence[Assumptions]) -> tuple[dict[str, Costs], Costs, str]:
    """A MedFuzz run's expected and worst cost (``Method.cost_estimate``): each item's prompts as its turns,
    replicates and controls would build them, under each scenario's assumptions."""
    from medfuzz.solvers.medfuzz import prompts

    items = spread(_items(task))
    if not items:
        return {s.label: {} for s in assumed}, {r: RoleCost(c) for r, c in ceiling.items()}, ""
    pack = prompts.load_pack(config.pack)
    exemplar = mean_of(tokens(prompts.exemplar_block([item])) for item in items)

    def mean_costs(fill: float, a: Assumptions | None) -> Costs:
        per_item: Costs = {}
        for item in items:
            shapes = MedFuzzShapes(config, item, pack, exemplar, fill, full_items=a is None)
            costs = medfuzz_worst(config, shapes, ceiling) if a is None else medfuzz_costs(config, n, shapes, a)
            for role, cost in costs.items():
                add_role_cost(per_item, role, cost.times(1.0 / len(items)))
        return per_item

    expected = {a.label: mean_costs(a.fill, a) for a in assumed}
    return expected, mean_costs(1.0, None), ""


def tces_cost(config: Any, task: Any, n: int, ceiling: Mapping[str, int],
              assumed: Sequence[Assumptions]) -> tuple[dict[str, Costs], Costs, str]:
    """A TCES run's expected and worst cost (``Method.cost_estimate``): its attackable items' prompts, up to
    the query budget each."""
    from medfuzz.solvers.tces.attack import clean_item, skip_reason, target_messages, vocabulary_matcher

    # the task's own test (the count it logged when it was built), here for the items' prompts
    matcher = vocabulary_matcher(config.entity, config.vocabulary)
    attackable = [item for item in map(clean_item, _items(task)) if skip_reason(item, matcher, config.entity) is None]
    prompt = mean_of(sum(tokens(m.content) for m in target_messages(item)) for item in spread(attackable))
    expected = {a.label: tces_costs(config, len(attackable), prompt, a) for a in assumed}
    calls = ceiling.get("target", 0)
    worst = {"target": RoleCost(calls, calls * prompt, calls * config.max_tokens)}
    return expected, worst, f"({len(attackable)} of {len(task.dataset)} items with a {config.entity} distractor)"


def _one_call_each(task: Any, ceiling: Mapping[str, int], assumed: Sequence[Assumptions],
                   max_tokens: int | None) -> tuple[dict[str, Costs], Costs, str]:
    """One answer per sample (the clean baseline, MedGuard) plus MedGuard's deferred rewrites: calls as the bound
    says; a reply as long as the level's max_tokens allows (a share ``fill`` of it), else ``free_reply``."""
    prompt = mean_of(tokens(_sample_text(s)) for s in spread(list(task.dataset)))
    expected: dict[str, Costs] = {}
    for a in assumed:
        reply = a.fill * max_tokens if max_tokens else a.free_reply
        expected[a.label] = {role: RoleCost(c, c * prompt, c * reply) for role, c in ceiling.items()}
    cap = max_tokens or max(s.free_reply for s in assumed)
    worst = {role: RoleCost(c, c * prompt, c * cap) for role, c in ceiling.items()}
    return expected, worst, ""
