"""The arithmetic of ``medfuzz run``'s cost estimate (``cost``): the labelled assumptions and how they are
parsed, tokens from text, and the expected calls and tokens per role of one MedFuzz or TCES item under a config
and an assumption (the control loop replayed through ``MedFuzzConfig.control_schedule``)."""

from __future__ import annotations

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


def add_role_cost(costs: Costs, role: str, cost: RoleCost) -> None:
    costs[role] = costs.get(role, RoleCost(0.0)) + cost


def mean_of(values: Iterable[float]) -> float:
    values = list(values)
    return sum(values) / len(values) if values else 0.0


def spread(seq: Sequence[Any], most: int = 200) -> list[Any]:
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
    add_role_cost(costs, "target",
                  shapes.dialog.cost(replicates) + shapes.dialog_fuzzed.cost(replicates * a.accuracy * turns))
    item_retries = _tries(a.rejects, config.max_retries + 1) - 1.0
    attacker = RoleCost(0.0)
    for p, turn, item_call in zip(reached, shapes.turns, shapes.item_calls, strict=True):
        attacker = attacker + turn.cost(p) + item_call.cost(p * item_retries)
    add_role_cost(costs, "attacker", attacker.times(replicates * a.accuracy))
    successes = replicates * a.accuracy * a.asr
    if config.faithfulness == "judge":
        add_role_cost(costs, "judge", shapes.judge.cost(successes))
    if config.controls > 0:
        controls = controls_per_test(config, a.effective)
        usable = 1.0 - a.rejects ** max(1, config.control_tries)
        add_role_cost(costs, "attacker_controls", shapes.control.cost(successes * controls * _tries(a.rejects,
                                                                                            config.control_tries)))
        draw = shapes.dialog_fuzzed if config.pvalue_prompt == "dialog" else shapes.direct
        p0_items = items * (1.0 - (1.0 - a.accuracy * a.asr) ** config.replicates)  # p-hat of the original, shared
        draws = config.option_orders * (successes * (1.0 + controls * usable) + p0_items)
        add_role_cost(costs, "target_significance", draw.cost(draws))
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
