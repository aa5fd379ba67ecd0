"""What a ``medfuzz run`` is expected to cost, printed beside its call bound before the first call (``--dry-run``
and the run's own start): calls and tokens per run and role, under three labelled assumptions (the fewest calls,
the expected, the most), and with prices per 1,000 tokens (``--price MODEL=IN/OUT``) the expected and worst-case
bill.

The estimate reads what the bound reads (``suite.bound``: the built tasks' samples and each run's config from
``suite.method_config``), never a level's numbers: the same config that gives ``max_calls`` gives K, the
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
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, fields, replace
from functools import cache
from typing import Any

from medfuzz.options import ConfigError

CHARS_PER_TOKEN = 4.0
ADDED_TOKENS = 50  # what an attacker's modified item adds to the question (patient characteristics: ~40 words)
JUDGE_REPLY = 10  # a faithfulness judge's reply: one short line per added span
TARGET_ROLES = ("target", "target_significance", "judge", "generator")  # asked of the run's own model
FREE_MODELS = ("medfuzz-template/", "embedded")  # no paid tokens: the template attacker (no LLM), the embedded model


@dataclass(frozen=True)
class Assumptions:
    """What the estimate assumes where no setting says (module docstring); every value a share in [0, 1] but
    ``free_reply`` (tokens)."""

    label: str
    accuracy: float
    asr: float
    effective: float
    tces_asr: float
    rejects: float
    fill: float
    free_reply: int

    def legend(self) -> str:
        return (f"{self.label}: clean accuracy {self.accuracy:g}, MedFuzz ASR {self.asr:g}, {self.effective:g} of "
                f"its successes real effects, TCES ASR@B {self.tces_asr:g}, {self.rejects:g} of attacker replies "
                f"rejected, replies at {self.fill:g} of their budget ({self.free_reply:,} tokens without one)")


# the fewest calls, the expected, the most: MedFuzz pays most where attacks succeed and are real (every control),
# TCES where they fail (every query of the budget)
SCENARIOS = (
    Assumptions("fewest", accuracy=0.6, asr=0.1, effective=0.0, tces_asr=0.6, rejects=0.0, fill=0.3,
                free_reply=50),
    Assumptions("expected", accuracy=0.75, asr=0.3, effective=0.5, tces_asr=0.3, rejects=0.1, fill=0.6,
                free_reply=250),
    Assumptions("most", accuracy=0.9, asr=0.7, effective=1.0, tces_asr=0.0, rejects=0.3, fill=1.0,
                free_reply=1000),
)
EXPECT_NAMES = tuple(f.name for f in fields(Assumptions) if f.name != "label")


def parse_expect(values: Sequence[str]) -> dict[str, float]:
    """``--expect NAME=VALUE[,NAME=VALUE...]`` (given once or more) as the values the estimate takes as known."""
    known: dict[str, float] = {}
    for value in values:
        for part in (p.strip() for p in value.split(",")):
            if not part:
                continue
            name, sep, text = part.partition("=")
            name = name.strip().replace("-", "_")
            if not sep or name not in EXPECT_NAMES:
                raise ConfigError(f"--expect {part!r}: expected NAME=VALUE with NAME one of {', '.join(EXPECT_NAMES)}"
                                  " (e.g. accuracy=0.8,asr=0.2)")
            try:
                number = float(text)
            except ValueError:
                raise ConfigError(f"--expect {part!r}: {text.strip()!r} is not a number") from None
            if name == "free_reply":
                if number < 1:
                    raise ConfigError(f"--expect {part!r}: free_reply is a number of tokens, at least 1")
            elif not 0.0 <= number <= 1.0 or (name == "fill" and number == 0.0):
                raise ConfigError(f"--expect {part!r}: a share between 0 and 1")
            known[name] = number
    return known


def scenarios(known: Mapping[str, float] | None = None) -> tuple[Assumptions, ...]:
    """The three scenarios, each with the values the user knows in place of the assumed ones."""
    known = dict(known or {})
    if "free_reply" in known:
        known["free_reply"] = int(known["free_reply"])
    return tuple(replace(s, **known) for s in SCENARIOS)


def parse_prices(values: Sequence[str]) -> dict[str, tuple[float, float]]:
    """``--price MODEL=IN/OUT`` (once per model): dollars (or any currency) per 1,000 input and output tokens."""
    prices: dict[str, tuple[float, float]] = {}
    for value in values:
        model, sep, pair = value.rpartition("=")
        inp, slash, out = pair.partition("/")
        try:
            price = (float(inp), float(out))
        except ValueError:
            price = (-1.0, -1.0)
        if not sep or not model.strip() or not slash or min(price) < 0:
            raise ConfigError(f"--price {value!r}: expected MODEL=IN/OUT, prices per 1,000 input and output tokens "
                              "(e.g. openai/gpt-4o-mini=0.00015/0.0006)")
        prices[model.strip()] = price
    return prices


# ------------------------------------------------------------------------------------------------ arithmetic


def tokens(text: str) -> float:
    return len(text) / CHARS_PER_TOKEN


def _tries(rate: float, tries: int) -> float:
    """Expected calls of a step asked again with probability ``rate`` each time, at most ``tries`` calls."""
    return sum(rate ** i for i in range(max(1, tries)))


def turns_reached(turns: int, asr: float) -> list[float]:
    """P(an attack on a replicate answered right reaches turn t), t = 1..K, for attacks that flip the answer within
    K turns with probability ``asr``: an even mix of two shapes, a constant chance per turn (most flips early, as
    the paper's accuracy-vs-attempts curves flatten) and a flip turn uniform on 1..K (an attacker that needs a
    few post-mortems to find what works, as the planted one does). Either alone was off by up to 1.4x on the
    planted runs' attack turns (bench/suite_cost_estimate.py)."""
    if asr >= 1.0:
        constant = [1.0] + [0.0] * (turns - 1)
    else:
        stay = (1.0 - asr) ** (1.0 / turns)
        constant = [stay ** t for t in range(turns)]
    uniform = [(1.0 - asr) + asr * (turns - t) / turns for t in range(turns)]
    return [(c + u) / 2 for c, u in zip(constant, uniform, strict=True)]


@cache  # configs are frozen: one replay per config and stop, however many items and scenarios ask
def controls_scored(config: Any, first_exceedance: int | None) -> tuple[int, int]:
    """(controls drawn, controls the decision reads) of one attack whose first control at least as far from p0 as
    the attack is control ``first_exceedance`` (1-based; None: none is), through the engine's control loop."""
    schedule = config.control_schedule()
    while drawn := schedule.next_batch():
        schedule.record(0.5, 0.0, [0.0 if i + 1 == first_exceedance else 0.5 for i in drawn])
    return schedule.attempted, schedule.decided_at or schedule.attempted


@cache
def null_controls(config: Any) -> tuple[float, float]:
    """Expected (controls drawn, controls read) of a null attack: its first exceedance at control l with
    probability 1 / (l (l + 1)) (the attack's distance is the largest of l + 1 exchangeable ones), none among the
    M with 1 / (M + 1)."""
    limit = config.max_controls
    if limit <= 0:
        return 0.0, 0.0
    scored = used = 0.0
    for first in range(1, limit + 1):
        drawn, read = controls_scored(config, first)
        weight = 1.0 / (first * (first + 1))
        scored, used = scored + weight * drawn, used + weight * read
    drawn, read = controls_scored(config, None)
    return scored + drawn / (limit + 1), used + read / (limit + 1)


def controls_per_test(config: Any, effective: float) -> float:
    """Expected controls drawn per tested attack: a real effect draws what an attack no control reaches does."""
    if config.max_controls <= 0:
        return 0.0
    return effective * controls_scored(config, None)[0] + (1.0 - effective) * null_controls(config)[0]


@dataclass(frozen=True)
class RoleCost:
    calls: float
    tokens_in: float = 0.0
    tokens_out: float = 0.0

    def __add__(self, other: RoleCost) -> RoleCost:
        return RoleCost(self.calls + other.calls, self.tokens_in + other.tokens_in, self.tokens_out + other.tokens_out)

    def times(self, k: float) -> RoleCost:
        return RoleCost(self.calls * k, self.tokens_in * k, self.tokens_out * k)


Costs = dict[str, RoleCost]


def _add(costs: Costs, role: str, cost: RoleCost) -> None:
    costs[role] = costs.get(role, RoleCost(0.0)) + cost


def _mean(values: Iterable[float]) -> float:
    values = list(values)
    return sum(values) / len(values) if values else 0.0


def _spread(seq: Sequence[Any], most: int = 200) -> list[Any]:
    """At most ``most`` elements, evenly spread (prompt sizes are averaged over them)."""
    if len(seq) <= most:
        return list(seq)
    return [seq[i * len(seq) // most] for i in range(most)]


@dataclass(frozen=True)
class _Dialog:
    """One use of a prompt: its calls and their tokens (``fill`` of the budgets)."""

    calls: int
    tokens_in: float
    tokens_out: float

    def cost(self, times: float = 1.0) -> RoleCost:
        return RoleCost(self.calls * times, self.tokens_in * times, self.tokens_out * times)

    def per_call(self, calls: float) -> RoleCost:
        return RoleCost(calls, self.tokens_in / self.calls * calls, self.tokens_out / self.calls * calls)


class MedFuzzShapes:
    """Prompt sizes of one item's MedFuzz calls at a given fill: the target's 3-step dialog and the direct p-hat
    prompt (original and modified question), the attacker's dialog turn by turn, a control fuzz."""

    def __init__(self, config: Any, item: Any, pack: Any, exemplar_tokens: float, fill: float,
                 full_items: bool = False) -> None:
        from medfuzz.solvers.medfuzz import prompts

        cot, conf = fill * config.cot_budget, fill * config.confidence_tokens
        answer = max(1.0, fill * config.answer_tokens)
        plan = fill * config.plan_budget
        shown = tokens(prompts.show_item(item))
        item_out = config.item_budget if full_items else min(config.item_budget, shown + ADDED_TOKENS)
        system = tokens(prompts.TARGET_SYSTEM) + config.exemplars * exemplar_tokens
        fuzzed = item.with_question(item.clean_question() + " x" * int(ADDED_TOKENS * CHARS_PER_TOKEN / 2))

        def dialog(question: Any) -> _Dialog:
            first = system + tokens(prompts.target_cot(question))
            second = first + cot + tokens(prompts.TARGET_CONFIDENCE)
            third = second + conf + tokens(prompts.target_answer(question))
            return _Dialog(3, first + second + third, cot + conf + answer)

        self.dialog, self.dialog_fuzzed = dialog(item), dialog(fuzzed)
        self.direct = _Dialog(1, system + tokens(prompts.target_direct(fuzzed)), answer)
        cot_text = "x" * int(cot * CHARS_PER_TOKEN)
        conf_text = ", ".join(f"{letter}: 3" for letter in item.letters)
        attacker_system = tokens(prompts.ATTACKER_SYSTEM)
        length = attacker_system + tokens(prompts.attacker_cold_start(pack, item, cot_text, conf_text))
        request = tokens(prompts.attacker_item_request(item))
        self.turns: list[_Dialog] = []
        self.item_calls: list[_Dialog] = []  # the modified-item call of each turn (asked again when rejected)
        for turn in range(1, config.turns + 1):
            calls, used_in, used_out = 0, 0.0, 0.0
            if turn > 1:
                length += tokens(prompts.attacker_postmortem(conf_text, cot_text, conf_text))
                calls, used_in, used_out = calls + 1, used_in + length, used_out + plan
                length += plan + tokens(prompts.attacker_replan(pack, item))
            calls, used_in, used_out = calls + 1, used_in + length, used_out + plan
            length += plan + request
            self.item_calls.append(_Dialog(1, length, item_out))
            calls, used_in, used_out = calls + 1, used_in + length, used_out + item_out
            length += item_out
            self.turns.append(_Dialog(calls, used_in, used_out))
        self.control = _Dialog(1, attacker_system + tokens(prompts.control_fuzz(pack, item, fuzzed, ADDED_TOKENS)),
                               item_out)
        self.judge = _Dialog(1, cot + tokens(prompts.faithfulness_judge(pack, "", ["x" * 80])), JUDGE_REPLY)


def medfuzz_costs(config: Any, items: int, shapes: MedFuzzShapes, a: Assumptions) -> Costs:
    """Expected calls and tokens per role of a MedFuzz run on ``items`` items of these prompt sizes."""
    costs: Costs = {}
    replicates = config.replicates * items
    reached = turns_reached(config.turns, a.asr)
    turns = sum(reached)  # expected turns of an attack on a replicate answered right
    _add(costs, "target", shapes.dialog.cost(replicates) + shapes.dialog_fuzzed.cost(replicates * a.accuracy * turns))
    item_retries = _tries(a.rejects, config.max_retries + 1) - 1.0
    attacker = RoleCost(0.0)
    for p, turn, item_call in zip(reached, shapes.turns, shapes.item_calls, strict=True):
        attacker = attacker + turn.cost(p) + item_call.cost(p * item_retries)
    _add(costs, "attacker", attacker.times(replicates * a.accuracy))
    successes = replicates * a.accuracy * a.asr
    if config.faithfulness == "judge":
        _add(costs, "judge", shapes.judge.cost(successes))
    if config.controls > 0:
        controls = controls_per_test(config, a.effective)
        usable = 1.0 - a.rejects ** max(1, config.control_tries)
        _add(costs, "attacker_controls", shapes.control.cost(successes * controls * _tries(a.rejects,
                                                                                            config.control_tries)))
        draw = shapes.dialog_fuzzed if config.pvalue_prompt == "dialog" else shapes.direct
        p0_items = items * (1.0 - (1.0 - a.accuracy * a.asr) ** config.replicates)  # p-hat of the original, shared
        draws = config.option_orders * (successes * (1.0 + controls * usable) + p0_items)
        _add(costs, "target_significance", draw.cost(draws))
    return costs


def medfuzz_worst(config: Any, shapes: MedFuzzShapes, bound: Mapping[str, int]) -> Costs:
    """The bound's calls, each with the tokens of the largest call of its kind (``shapes`` at fill 1)."""
    worst: Costs = {}
    per_call = {
        "target": shapes.dialog_fuzzed,
        "attacker": shapes.turns[-1],
        "attacker_controls": shapes.control,
        "target_significance": shapes.dialog_fuzzed if config.pvalue_prompt == "dialog" else shapes.direct,
        "judge": shapes.judge,
    }
    for role, calls in bound.items():
        worst[role] = per_call[role].per_call(calls) if role in per_call else RoleCost(calls)
    return worst


def tces_costs(config: Any, attackable: int, prompt: float, a: Assumptions) -> Costs:
    """Expected target calls of a TCES run: the clean question on each attackable item, then, on those answered
    right, queries until the first flip or the budget B."""
    if a.tces_asr >= 1.0:
        queries = 1.0
    else:
        stay = (1.0 - a.tces_asr) ** (1.0 / config.budget)
        queries = sum(stay ** j for j in range(config.budget))
    calls = attackable * (1.0 + a.accuracy * queries)
    return {"target": RoleCost(calls, calls * prompt, calls * max(1.0, a.fill * config.max_tokens))}


# ------------------------------------------------------------------------------------------------ the suite


@dataclass(frozen=True)
class RunEstimate:
    """One run's expected costs per scenario, and its worst case (the bound, each call at its largest)."""

    key: str  # the run's name in the bound (``suite.run_key``)
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
    """The expected cost of the runs ``suite.bound`` bounded (``built``: (run, task) pairs; ``bound``: its
    ``Bound``, whose keys this follows); ``max_tokens``: the level's generate cap of plain answers."""
    from medfuzz.cli.suite.plan import method_config, run_key

    assumed = scenarios(known)
    runs: list[RunEstimate] = []
    unbounded = False
    for run, task in built:
        config = method_config(run)
        n = len(task.dataset)
        for model in models:
            key = run_key(run.label, model, several=len(models) > 1)
            ceiling = bound.per_run[key]
            if run.method == "medfuzz" and config is not None:
                expected, worst, note = _medfuzz(config, task, n, ceiling, assumed)
            elif run.method == "tces" and config is not None:
                expected, worst, note = _tces(config, task, ceiling, assumed)
            elif config is None:
                expected, worst, note = _one_call_each(task, ceiling, assumed, max_tokens)
                unbounded = unbounded or max_tokens is None
            else:  # another package's method whose config bounds its calls: its bound, as no model says more
                expected = {s.label: {role: RoleCost(c) for role, c in ceiling.items()} for s in assumed}
                worst, note = {role: RoleCost(c) for role, c in ceiling.items()}, "(its bound: no estimate known)"
            runs.append(RunEstimate(key, model, run.method, expected, worst, note))
    return SuiteEstimate(runs, assumed, dict(known or {}), attacker, unbounded)


def _medfuzz(config: Any, task: Any, n: int, ceiling: Mapping[str, int],
             assumed: Sequence[Assumptions]) -> tuple[dict[str, Costs], Costs, str]:
    from medfuzz.solvers.medfuzz import prompts

    items = _spread(_items(task))
    if not items:
        return {s.label: {} for s in assumed}, {r: RoleCost(c) for r, c in ceiling.items()}, ""
    pack = prompts.load_pack(config.pack)
    exemplar = _mean(tokens(prompts.exemplar_block([item])) for item in items)

    def mean_costs(fill: float, a: Assumptions | None) -> Costs:
        per_item: Costs = {}
        for item in items:
            shapes = MedFuzzShapes(config, item, pack, exemplar, fill, full_items=a is None)
            costs = medfuzz_worst(config, shapes, ceiling) if a is None else medfuzz_costs(config, n, shapes, a)
            for role, cost in costs.items():
                _add(per_item, role, cost.times(1.0 / len(items)))
        return per_item

    expected = {a.label: mean_costs(a.fill, a) for a in assumed}
    return expected, mean_costs(1.0, None), ""


def _tces(config: Any, task: Any, ceiling: Mapping[str, int],
          assumed: Sequence[Assumptions]) -> tuple[dict[str, Costs], Costs, str]:
    from medfuzz.solvers.tces.attack import clean_item, skip_reason, target_messages, vocabulary_matcher

    # the task's own test (the count it logged when it was built), here for the items' prompts
    matcher = vocabulary_matcher(config.entity, config.vocabulary)
    attackable = [item for item in map(clean_item, _items(task)) if skip_reason(item, matcher, config.entity) is None]
    prompt = _mean(sum(tokens(m.content) for m in target_messages(item)) for item in _spread(attackable))
    expected = {a.label: tces_costs(config, len(attackable), prompt, a) for a in assumed}
    calls = ceiling.get("target", 0)
    worst = {"target": RoleCost(calls, calls * prompt, calls * config.max_tokens)}
    return expected, worst, f"({len(attackable)} of {len(task.dataset)} items with a {config.entity} distractor)"


def _one_call_each(task: Any, ceiling: Mapping[str, int], assumed: Sequence[Assumptions],
                   max_tokens: int | None) -> tuple[dict[str, Costs], Costs, str]:
    """One answer per sample (the clean baseline, MedGuard) plus MedGuard's deferred rewrites: calls as the bound
    says; a reply as long as the level's max_tokens allows (a share ``fill`` of it), else ``free_reply``."""
    prompt = _mean(tokens(_sample_text(s)) for s in _spread(list(task.dataset)))
    expected: dict[str, Costs] = {}
    for a in assumed:
        reply = a.fill * max_tokens if max_tokens else a.free_reply
        expected[a.label] = {role: RoleCost(c, c * prompt, c * reply) for role, c in ceiling.items()}
    cap = max_tokens or max(s.free_reply for s in assumed)
    worst = {role: RoleCost(c, c * prompt, c * cap) for role, c in ceiling.items()}
    return expected, worst, ""
