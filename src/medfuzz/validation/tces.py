"""TCES checks: run the real attack (``attack_item`` → ``TCESResult.to_dict`` → ``scorers.tces``, the path both
harness shells use) against the planted target, and compare every statistic with a value computed here from the
planted rule and the perturbation set alone, by exact sums or Monte Carlo with numpy.

The planted rule (``TCESSpec``, restated independently of the attack): with no jitter (``noise = 0``) and the
key's probability above 1/k, the target answers the key at temperature 0 unless the question shows a
substituted distractor whose entity *wins* — within cosine distance ``radius`` of the key's entity (near
regime) or one of the ``universal`` names (far regime) — and then answers that distractor. So an attack
succeeds at the first query that puts in a winning entity, and:

- RandS / PDWS: the replacements are successive draws without replacement from the pool (the vocabulary minus
  every option's entity) with weights h^n (n = 0 for RandS), h the cosine distance to the key (Eq. 3).
  ASR@1 = Σ_{winners} p_j exactly; ASR@b is simulated by drawing successive renormalised inverse-CDF draws
  (not the Gumbel-top-k the samplers use);
- DiscreteZOO: the target's key probability is the same for every non-winning entity, so every gradient
  estimate (Eq. 6) is zero and each step (Eq. 5, 7) goes to the available entry nearest the current one; the
  gradient points are uniform draws among the ``zoo_neighbourhood`` available entries nearest it, the first
  current entity is a uniformly drawn distractor entity (random word ranking). Simulated as such.

Gini-Simpson and the reused-entity ranking of a whole run are simulated by putting together one simulated
attack per item, many times: their planted interval is the central 99.9 % of those runs.

The denominators: in every other run the key is the answer to every clean question, so the items attacked
(answered correctly clean) and the items evaluated are the same set. One more run plants every other item
wrong before the attack (P(key) = ``WRONG_KEY`` < the other letters'), so clean accuracy is 1/2 and ASR, ASR@b
(over the attacked items) and accuracy after the attack (over every evaluated item) differ by their
denominators, each checked exactly against the planted sets.
"""

from __future__ import annotations

import asyncio
import math
import random
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from medfuzz import stats
from medfuzz.benchmarks.items import MCQItem, derive_seed
from medfuzz.planted import PlantedChatModel, PlantedSpec, PlantedTarget
from medfuzz.scorers import tces as tces_scorer
from medfuzz.solvers.tces.attack import TCESResources, attack_item
from medfuzz.solvers.tces.config import TCESConfig
from medfuzz.validation.checks import (
    LEVEL,
    Check,
    Size,
    binomial_power,
    count_check,
    exact_check,
    normal_power,
    proportion_check,
    with_power,
    z,
)
from medfuzz.validation.items import synthetic_items

METHOD = "TCES"
# (label, TCESConfig options): the samplers of the paper's Table 1-2, PDWS in both regimes
SAMPLERS: tuple[tuple[str, dict[str, Any]], ...] = (
    ("RandS", {"sampler": "rands"}),
    ("PDWS n=-20", {"sampler": "pdws", "n": -20.0}),
    ("PDWS n=+20", {"sampler": "pdws", "n": 20.0}),
    ("DiscreteZOO", {"sampler": "zoo"}),
)
NEAR_SAMPLER, FAR_SAMPLER = "PDWS n=-20", "PDWS n=+20"


@dataclass(frozen=True)
class Plan:
    items: int
    vocabulary: int  # names drawn from the builtin list (plus the items' and the universal names)
    mc: int  # simulated attacks per item and sampler
    # items of RandS's run in the near+universal spec: RandS succeeds on ~1 item in 6 there, and the checks on
    # its successes (Gini-Simpson, universal share) cannot fail on 6 successes (ci at 40 items: [0, 1])
    mix_items: int = 0
    budget: int = 8
    min_power: float = 0.0  # ASR rows below this power against every defect are left out (``MIN_POWER``)


PLANS: dict[str, Plan] = {"ci": Plan(items=40, vocabulary=300, mc=400, mix_items=300, min_power=0.8),
                          "full": Plan(items=150, vocabulary=800, mc=2_000, mix_items=400)}


# ----------------------------------------------------------------------------- the perturbation set


def validation_vocabulary(spec: PlantedSpec, items: Sequence[MCQItem], size: int, seed: int) -> Path:
    """A name-per-line vocabulary file: ``size`` names drawn (seeded) from the builtin list of the spec's entity
    type, plus every option of ``items`` and the planted universal names. Kept under ``$MEDFUZZ_CACHE`` so its
    vectors are cached like any vocabulary's."""
    from medfuzz.paths import cache_dir, write_atomically
    from medfuzz.samplers.vocab import load_vocabulary, normalise_name

    builtin = load_vocabulary(spec.tces.entity)
    drawn = random.Random(derive_seed(seed, "tces-vocabulary")).sample(list(builtin.names), min(size, len(builtin)))
    extra = [text for item in items for text in item.clean_options().values()] + list(spec.tces.universal)
    names, seen = [], set()
    for name in sorted(drawn, key=str.lower) + extra:
        if normalise_name(name) not in seen:
            seen.add(normalise_name(name))
            names.append(name)
    folder = cache_dir() / "validation"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"tces-{spec.tces.entity}-{size}-{seed}.txt"
    text = "# medfuzz validate: TCES perturbation set\n" + "\n".join(names) + "\n"
    if not path.is_file() or path.read_text(encoding="utf-8") != text:
        # two validations at once (or parallel test workers) never read half a file
        write_atomically(path, lambda stream: stream.write(text.encode("utf-8")))
    return path


@dataclass
class World:
    """The perturbation set as the planted rule sees it: names, unit vectors (float64), name → row."""

    names: tuple[str, ...]
    unit: np.ndarray
    index: dict[str, int]
    cosine: np.ndarray = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self.cosine = self.unit @ self.unit.T

    @classmethod
    def load(cls, spec: PlantedSpec) -> World:
        from medfuzz.samplers.embeddings import get_encoder, vocabulary_vectors
        from medfuzz.samplers.vocab import load_vocabulary, normalise_name

        vocabulary = load_vocabulary(spec.tces.entity, spec.tces.vocabulary)
        vectors = np.asarray(vocabulary_vectors(vocabulary, get_encoder(spec.tces.embedding)), dtype=np.float64)
        unit = vectors / np.linalg.norm(vectors, axis=1, keepdims=True)
        index: dict[str, int] = {}
        for row, name in enumerate(vocabulary.names):
            index.setdefault(normalise_name(name), row)
        return cls(vocabulary.names, unit, index)

    def row(self, text: str) -> int:
        from medfuzz.samplers.vocab import normalise_name

        found = self.index.get(normalise_name(text))
        if found is None:
            raise ValueError(f"validation item option {text!r} is not a vocabulary name")
        return found


@dataclass(frozen=True)
class ItemTruth:
    """One item under the planted rule: the key's row, the distractors' rows, the pool, distances and winners."""

    item_id: str
    key: int
    distractors: tuple[int, ...]
    pool: np.ndarray  # bool over the vocabulary
    distance: np.ndarray  # 1 - cos to the key's entity
    winner: np.ndarray  # bool: putting this entry in wins
    universal: np.ndarray  # bool


def item_truth(world: World, item: MCQItem, spec: PlantedSpec) -> ItemTruth:
    options = item.clean_options()
    key = world.row(options[item.answer])
    distractors = tuple(world.row(text) for letter, text in options.items() if letter != item.answer)
    pool = np.ones(len(world.names), dtype=bool)
    pool[[key, *distractors]] = False
    distance = np.clip(1.0 - world.cosine[key], 0.0, 2.0)
    universal = np.zeros(len(world.names), dtype=bool)
    universal[[world.row(name) for name in spec.tces.universal]] = True
    winner = universal.copy()
    if spec.tces.radius is not None:
        winner |= distance <= spec.tces.radius
    return ItemTruth(item.id, key, distractors, pool, distance, winner & pool, universal)


# ----------------------------------------------------------------------------------- simulation


@dataclass(frozen=True)
class Simulated:
    """Per item: ``query[i, r]`` the query (1..B) at which simulated attack r first won (0 = never) and
    ``entity[i, r]`` the row it put in (-1 = none); ``asr1`` the exact ASR@1 per item where known."""

    query: np.ndarray
    entity: np.ndarray
    asr1: np.ndarray | None = None

    def asr_at(self, b: int) -> np.ndarray:
        """Per item, the simulated P(success within b queries)."""
        return ((self.query >= 1) & (self.query <= b)).mean(axis=1)


def sampling_first_win(truth: ItemTruth, n: float, budget: int, reps: int,
                       rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray, float]:
    """Successive weighted draws without replacement (weights h^n over the pool), ``reps`` attacks at once, by
    inverse CDF on the renormalised weights at each draw. Returns (first winning query, its row, exact ASR@1)."""
    candidates = np.flatnonzero(truth.pool)
    with np.errstate(divide="ignore"):
        log_weight = n * np.log(truth.distance[candidates]) if n != 0 else np.zeros(len(candidates))
    weight = np.exp(log_weight - log_weight.max())  # h in (0, 2], |n| = 20: no entry underflows to 0
    asr1 = float(weight[truth.winner[candidates]].sum() / weight.sum())
    available = np.ones((reps, len(candidates)), dtype=bool)
    query = np.zeros(reps, dtype=np.int64)
    entity = np.full(reps, -1, dtype=np.int64)
    rows = np.arange(reps)
    for b in range(1, min(budget, len(candidates)) + 1):
        cdf = np.cumsum(np.where(available, weight, 0.0), axis=1)
        u = rng.random(reps) * cdf[:, -1]
        pick = np.minimum((cdf <= u[:, None]).sum(axis=1), len(candidates) - 1)
        available[rows, pick] = False
        chosen = candidates[pick]
        hit = truth.winner[chosen] & (query == 0)
        query[hit], entity[hit] = b, chosen[hit]
    return query, entity, asr1


def zoo_first_win(world: World, truth: ItemTruth, config: TCESConfig, reps: int,
                  rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """DiscreteZOO under the planted rule (zero gradient: see the module docstring), ``reps`` attacks."""
    pool = np.flatnonzero(truth.pool)
    nearest: dict[int, list[int]] = {}  # current row -> the pool, nearest first (computed once per row)

    def by_distance(current: int) -> list[int]:
        if current not in nearest:
            nearest[current] = pool[np.argsort(-world.cosine[current, pool], kind="stable")].tolist()
        return nearest[current]

    query = np.zeros(reps, dtype=np.int64)
    entity = np.full(reps, -1, dtype=np.int64)
    for r in range(reps):
        used_rows: set[int] = set()
        current = truth.distractors[int(rng.integers(len(truth.distractors)))]
        used = 0
        while used < config.budget and len(used_rows) < len(pool):
            left = len(pool) - len(used_rows)
            m = min(config.zoo_m, config.budget - used - 1, left - 1)
            order = by_distance(current)
            if m > 0:
                hood = [j for j in order if j not in used_rows][:config.zoo_neighbourhood]
                drawn = [hood[i] for i in rng.choice(len(hood), size=m, replace=False)]
            else:
                drawn = []
            won = next((i for i, j in enumerate(drawn) if truth.winner[j]), None)
            if won is not None:
                query[r], entity[r] = used + 1 + won, drawn[won]
                break
            used_rows.update(drawn)
            used += len(drawn)
            step = next(j for j in order if j not in used_rows)
            used_rows.add(step)
            used += 1
            if truth.winner[step]:
                query[r], entity[r] = used, step
                break
            current = step
    return query, entity


def simulate(world: World, truths: Sequence[ItemTruth], config: TCESConfig, reps: int, seed: int) -> Simulated:
    rng = np.random.default_rng(seed)
    queries, entities, exact = [], [], []
    for truth in truths:
        if config.sampler == "zoo":
            q, e = zoo_first_win(world, truth, config, reps, rng)
        else:
            q, e, a1 = sampling_first_win(truth, config.n if config.sampler == "pdws" else 0.0, config.budget,
                                          reps, rng)
            exact.append(a1)
        queries.append(q)
        entities.append(e)
    return Simulated(np.array(queries), np.array(entities), np.array(exact) if exact else None)


def gini_simpson_of(rows: np.ndarray) -> float:
    """1 - Σ q_j² of the rows (written out here rather than calling ``medfuzz.stats``: independent)."""
    if len(rows) == 0:
        return math.nan
    _, counts = np.unique(rows, return_counts=True)
    shares = counts / counts.sum()
    return float(1.0 - np.sum(shares**2))


def top_rows(rows: np.ndarray, names: Sequence[str], k: int) -> list[int]:
    """The k most frequent rows, ties broken by name (the order ``medfuzz`` documents for its ranking)."""
    counts = Counter(int(r) for r in rows)
    return [r for r, _ in sorted(counts.items(), key=lambda rc: (-rc[1], names[rc[0]]))[:k]]


# ----------------------------------------------------------------------------------- the real runs


def run_attacks(items: Sequence[MCQItem], spec: PlantedSpec, resources: TCESResources,
                config: TCESConfig) -> list[dict[str, Any]]:
    """Attack every item with the real engine and the planted target; the per-item records the scorers read."""
    model = PlantedChatModel(PlantedTarget(spec, items), spec.name)

    async def main() -> list[dict[str, Any]]:
        results = await asyncio.gather(*(attack_item(item, model, resources, config) for item in items))
        return [r.to_dict() for r in results]

    return asyncio.run(main())


@dataclass
class Run:
    label: str
    config: TCESConfig
    records: list[dict[str, Any]]
    simulated: Simulated
    world: World
    items: list[MCQItem] = field(default_factory=list)


def config_for(label: str, options: dict[str, Any], spec: PlantedSpec, vocabulary: Path, plan: Plan,
               seed: int) -> TCESConfig:
    # a seed per sampler, so that the runs compared by the ordering checks are independent
    return TCESConfig(entity=spec.tces.entity, vocabulary=str(vocabulary), embedding=spec.tces.embedding,
                      budget=plan.budget, temperature=0.0, seed=derive_seed(seed, "tces", label) % 2**31, **options)


def _attacked(records: Sequence[dict[str, Any]]) -> int:
    return sum(r["outcome"] in ("success", "attack_failed") for r in records)


# The defects each sampler's ASR rows exist for besides the counting one: another sampler's law in its place (the
# dispatch or its weights wrong): PDWS with n of the wrong sign or n = 0, RandS weighting by distance (either
# sign), DiscreteZOO's gradient step ignored (a uniform draw). Each value is the planted ASR of that sampler on
# the same items and regime; a row states the defect it catches best (a law can match the row's in one regime
# and not in the other: RandS and PDWS n = -20 both almost never win in the universal regime).
CONFUSED_WITH: dict[str, tuple[str, ...]] = {"PDWS n=-20": ("PDWS n=+20", "RandS"),
                                             "PDWS n=+20": ("PDWS n=-20", "RandS"),
                                             "RandS": ("PDWS n=-20", "PDWS n=+20"),
                                             "DiscreteZOO": ("RandS",)}
# at ci an ASR row is a check only where it has this power against one of its defects (the others, e.g.
# DiscreteZOO near, whose planted ASR is within 0.1 of RandS's, would need ~450 items): the rest run at full size,
# and DiscreteZOO's own defect is caught exactly by ``zoo_walk_check``
MIN_POWER = 0.8


def _planted_asr(run: Run, b: int) -> float:
    exact = b == 1 and run.simulated.asr1 is not None
    return float(np.mean(run.simulated.asr1)) if exact else float(np.mean(run.simulated.asr_at(b)))


def asr_checks(regime: str, run: Run, budget: int, others: dict[str, Run] | None = None,
               min_power: float = 0.0) -> list[Check]:
    """ASR@1 and ASR@B of one run against its planted value, each with the power against the most telling of
    its defects: a success counted one query late, or another sampler's law in its place (``CONFUSED_WITH``,
    for each of those runs in ``others``: the same items and regime). A row whose best power is below
    ``min_power`` is left out (``validate --size ci``: ``MIN_POWER``)."""
    measured = tces_scorer.asr_by_budget(run.records, budget)
    attacked = _attacked(run.records)
    confused = [others[label] for label in CONFUSED_WITH.get(run.label, ()) if label in (others or {})]
    checks = []
    for b in (1, budget):
        per_item = run.simulated.asr_at(b)
        exact = b == 1 and run.simulated.asr1 is not None
        planted = _planted_asr(run, b)
        reps = run.simulated.query.shape[1]
        mc_sd = 0.0 if exact else math.sqrt(float(np.sum(per_item * (1 - per_item))) / reps) / len(per_item)
        note = "exact: sum of Eq. 3 probabilities over the winners" if exact else f"Monte Carlo, {reps} per item"
        check = proportion_check(METHOD, f"{regime}: ASR@{b} {run.label}", planted,
                                 round(measured[b - 1] * attacked), attacked, note=note, extra_sd=mc_sd)
        # the defect: a query counted one budget step late (q < b instead of q <= b): ASR@(b-1), 0 at b = 1
        short = float(np.mean(run.simulated.asr_at(b - 1))) if b > 1 else 0.0
        defects = [("a success counted one query late (q < b: ASR@(b-1))", binomial_power(check, short))]
        defects += [(f"{other.label}'s law in its place (ASR {_planted_asr(other, b):.3f})",
                     binomial_power(check, _planted_asr(other, b))) for other in confused]
        defect, power = max(defects, key=lambda d: d[1])
        if power >= min_power:
            checks.append(with_power(check, defect, power))
    return checks


def zoo_walk_check(regime: str, run: Run, truths: Sequence[ItemTruth], neighbourhood: int) -> Check:
    """Exact: every DiscreteZOO query of the run follows the planted walk. Under the planted rule every gradient
    is zero (module docstring), so each step is the available entry nearest the current entity (Eq. 5, 7) and
    each gradient point one of the ``neighbourhood`` available entries nearest it; the walk starts at the
    victim's entity. Replayed from the records' attempts (an entry leaves the pool once queried), with 1e-6 of
    cosine slack for float32 ties. Its defect, RandS's law in its place (uniform draws from the pool), passes
    with probability the product over the run's queries of |allowed| / |available|."""
    by_id = {truth.item_id: truth for truth in truths}
    cosine = run.world.cosine
    wrong = total = 0
    log_pass = 0.0  # log P(uniform draws would land in every allowed set)
    for record in run.records:
        if not record.get("attempts") or not record.get("victim"):
            continue
        truth = by_id[record["item_id"]]
        available = truth.pool.copy()
        current = int(record["victim"]["vocab_index"])
        for attempt in record["attempts"]:
            row = int(attempt["vocab_index"])
            similarity = np.where(available, cosine[current], -np.inf)
            ranked = np.sort(similarity[available])[::-1]
            size = 1 if attempt["kind"] == "step" else min(neighbourhood, len(ranked))
            allowed = bool(available[row]) and similarity[row] >= ranked[size - 1] - 1e-6
            wrong += not allowed
            total += 1
            log_pass += math.log(size / len(ranked))
            available[row] = False
            if attempt["kind"] == "step":
                current = row
    check = count_check(METHOD, f"{regime}: DiscreteZOO queries off the planted walk (gradient points among the "
                        f"{neighbourhood} nearest available, steps to the nearest)", wrong, total,
                        note="replayed from the records' attempts")
    return with_power(check, "RandS's law in its place (uniform draws from the pool)", 1.0 - math.exp(log_pass))


def ordering_check(regime: str, faster: Run, slower: Run, k: int = 1) -> Check:
    """ASR@k(faster) − ASR@k(slower): the planted difference and an interval that must lie above 0 (the
    regime is found faster), from the per-item success probabilities (independent runs)."""
    p = faster.simulated.asr_at(k) if k > 1 or faster.simulated.asr1 is None else faster.simulated.asr1
    q = slower.simulated.asr_at(k) if k > 1 or slower.simulated.asr1 is None else slower.simulated.asr1
    planted = float(np.mean(p) - np.mean(q))
    se = math.sqrt(float(np.sum(p * (1 - p)) + np.sum(q * (1 - q)))) / len(p)
    measured = (tces_scorer.asr_by_budget(faster.records, k)[k - 1]
                - tces_scorer.asr_by_budget(slower.records, k)[k - 1])
    check = Check(METHOD, f"{regime}: ASR@{k} {faster.label} minus {slower.label} (> 0: found faster)", planted,
                  measured, max(planted - z() * se, 1e-9), planted + z() * se, len(p),
                  note="the interval is cut at 0: the planted regime must be found faster", lowest=-1.0, highest=1.0)
    # the defect: the samplers' regimes swapped (the sign of n flipped): the difference is -planted
    return with_power(check, "the regimes swapped (PDWS n of the wrong sign)",
                      normal_power(check, -planted, se * math.sqrt(len(p))))


def _simulated_runs(run: Run) -> list[np.ndarray]:
    """The winning rows of each simulated whole run (one simulated attack per item, replicate r)."""
    sim = run.simulated
    ok = (sim.query >= 1) & (sim.query <= run.config.budget)
    return [sim.entity[ok[:, r], r] for r in range(sim.query.shape[1])]


def _quantile_check(statistic: str, values: Sequence[float], measured: float, n: int, note: str,
                    lowest: float, highest: float) -> Check:
    """``lowest``..``highest``: the values the statistic can take on this run (a check whose interval covers
    them all cannot fail)."""
    values = np.asarray([v for v in values if not math.isnan(v)])
    tail = (1 - LEVEL) / 2
    low, high = np.quantile(values, [tail, 1 - tail])
    return Check(METHOD, statistic, float(np.mean(values)), measured, float(low), float(high), n, note=note,
                 lowest=lowest, highest=highest)


def _share_outside(check: Check, values: Sequence[float]) -> float:
    """P(the check fails) when the statistic is distributed as ``values`` (simulated runs under a defect); a
    run whose statistic is undefined (no success) fails as NaN would."""
    values = np.asarray(values, dtype=np.float64)
    inside = (values >= check.low - 1e-12) & (values <= check.high + 1e-12)
    return float(np.mean(~inside)) if len(values) else math.nan


def _strongest(check: Check, defects: Sequence[tuple[str, Sequence[float]]]) -> Check:
    """``check`` with the defect, of ``defects`` (name, the statistic's simulated values under it), that it
    catches with the highest probability."""
    scored = sorted(((name, _share_outside(check, values)) for name, values in defects),
                    key=lambda d: -1.0 if math.isnan(d[1]) else d[1], reverse=True)
    if not scored:
        return check
    (name, power), rest = scored[0], scored[1:]
    # the weaker defects stay in view: a row that only catches the crudest of them says so
    also = "; ".join(f"{other}: {p:.2f}" for other, p in rest)
    return with_power(check, f"{name} (P(fail) against {also})" if rest else name, power)


def diversity_checks(regime: str, run: Run, world: World, universal: Sequence[int],
                     others: Sequence[Run] = ()) -> list[Check]:
    """Gini-Simpson of the run's adversarial entities and, with ``universal``, the share of that set among the
    most reused ones, each against the central 99.9 % of simulated runs, with the power against another
    sampler's law in the run's place (``others``: simulated on the same items) and, for Gini-Simpson, the
    unbiased n/(n-1) normaliser."""
    summary = tces_scorer.summarise(run.records, top=max(1, len(universal)))
    simulated = _simulated_runs(run)
    note = f"central {LEVEL:.1%} of {len(simulated)} simulated runs"
    n = summary.successes
    # 1 - Σ q² lies in [0, 1 - 1/n] over n successes (n distinct entities reach the top)
    gini = _quantile_check(f"{regime}: Gini-Simpson of adversarial entities, {run.label}",
                           [gini_simpson_of(rows) for rows in simulated], summary.gini_simpson,
                           n, note, 0.0, 1.0 - 1.0 / n if n else 0.0)
    unbiased = [gini_simpson_of(rows) * len(rows) / max(len(rows) - 1, 1) for rows in simulated]
    checks = [_strongest(gini, [("the unbiased normaliser n/(n-1)", unbiased)] + [
        (f"{other.label}'s law in its place", [gini_simpson_of(rows) for rows in _simulated_runs(other)])
        for other in others])]
    # exact: the number medfuzz prints is 1 - Σ q² of the run's own successful replacements
    replaced = np.array([world.index.get(_norm(r["replacement"]), -1) for r in run.records
                         if r["outcome"] == "success"])
    checks.append(exact_check(METHOD, f"{regime}: Gini-Simpson = 1 - Σq² of the recorded replacements, {run.label}",
                              gini_simpson_of(replaced), summary.gini_simpson, n))
    if universal:
        planted_set = set(universal)

        def recovered(rows: np.ndarray) -> float:
            return len(planted_set & set(top_rows(rows, world.names, len(planted_set)))) / len(planted_set)

        top = [world.index.get(_norm(name), -1) for name, _ in summary.top_entities]
        precision = len(planted_set & set(top)) / len(planted_set)
        reuse = _quantile_check(
            f"{regime}: top-{len(planted_set)} reused entities in the universal set, {run.label}",
            [recovered(rows) for rows in simulated], precision, summary.successes,
            note + " (share of the planted set recovered)", 0.0, 1.0)
        checks.append(_strongest(reuse, [(f"{other.label}'s law in its place",
                                          [recovered(rows) for rows in _simulated_runs(other)]) for other in others]))
    return checks


def _norm(name: str) -> str:
    from medfuzz.samplers.vocab import normalise_name

    return normalise_name(name)


def _universal_share(run: Run, truths: Sequence[ItemTruth]) -> float:
    sim = run.simulated
    ok = (sim.query >= 1) & (sim.query <= run.config.budget)
    is_universal = np.array([t.universal[np.maximum(e, 0)] for t, e in zip(truths, sim.entity, strict=True)]) & ok
    return float(is_universal.sum() / max(1, ok.sum()))


def universal_share_check(regime: str, run: Run, truths: Sequence[ItemTruth], others: Sequence[Run] = ()) -> Check:
    """Share of successful attacks whose entity is universal, against its Monte-Carlo value; its power against
    another sampler's law in the run's place (``others``, simulated on the same items)."""
    sim = run.simulated
    ok = (sim.query >= 1) & (sim.query <= run.config.budget)
    planted = _universal_share(run, truths)
    successes = [r for r in run.records if r["outcome"] == "success"]
    hits = sum(bool(truths[0].universal[run.world.index[_norm(r["replacement"])]]) for r in successes)
    mc_sd = math.sqrt(planted * (1 - planted) / max(1, ok.sum()))
    check = proportion_check(METHOD, f"{regime}: share of successes by a universal entity, {run.label}", planted,
                             hits, len(successes), note="Monte Carlo", extra_sd=mc_sd)
    defects = [(f"{other.label}'s law in its place (share {_universal_share(other, truths):.3f})",
                binomial_power(check, _universal_share(other, truths))) for other in others]
    return with_power(check, *max(defects, key=lambda d: d[1])) if defects else check


def budget_check(regime: str, run: Run) -> Check:
    """Exact: no attack asks more than B queries. Counted three ways per record, each must stay within B: the
    attempts recorded, ``queries_used`` and the target's answered calls in the usage ledger (calls minus failed
    ones, i.e. retries, minus the clean question)."""
    budget = run.config.budget
    over = 0
    most = 0
    for r in run.records:
        target = (r.get("usage") or {}).get("target", {})
        answered = int(target.get("calls", 0)) - int(target.get("errors", 0))
        used = max(len(r["attempts"]), int(r["queries_used"] or 0), answered - 1)
        most = max(most, used)
        over += used > budget
    return count_check(METHOD, f"{regime}: attacks over the query budget B={budget}, {run.label}", over,
                       len(run.records), note=f"most queries used by one attack: {most}")


# ------------------------------------------------------------------------------------- denominators

WRONG_KEY, RIGHT_KEY = 0.1, 0.9  # P(key) of an item planted wrong / right before the attack (4-5 options)


def planted_wrong(items: Sequence[MCQItem]) -> set[str]:
    """Every other item: answered wrongly clean (at temperature 0 the key, at 0.1, is below each other letter)."""
    return {item.id for i, item in enumerate(items) if i % 2 == 1}


def accuracy_file(items: Sequence[MCQItem], wrong: set[str], seed: int) -> Path:
    """The planted accuracy table (``PlantedSpec.target.accuracy``): WRONG_KEY for ``wrong``, else RIGHT_KEY."""
    import json

    from medfuzz.paths import cache_dir, write_atomically

    path = cache_dir() / "validation" / f"tces-accuracy-{len(items)}-{seed}.jsonl"
    text = "".join(json.dumps({"id": item.id, "p": WRONG_KEY if item.id in wrong else RIGHT_KEY}) + "\n"
                   for item in items)
    if not path.is_file() or path.read_text(encoding="utf-8") != text:
        write_atomically(path, lambda stream: stream.write(text.encode("utf-8")))
    return path


def denominator_checks(setup: Setup, regime: str, spec: PlantedSpec) -> list[Check]:
    """A run with half the items planted wrong before the attack: which items end ``already_wrong`` (exact), clean
    accuracy, ASR and ASR@b over the attacked (clean-correct) items, accuracy after the attack and the pairs'
    attacked accuracy over every evaluated item (exact: numerators counted from the records' outcomes,
    denominators from the planted sets), and ASR@1, ASR@B against the planted values over the attacked items."""
    items = setup.items
    wrong = planted_wrong(items)
    right = [item for item in items if item.id not in wrong]
    spec = spec.with_target(accuracy=str(accuracy_file(items, wrong, setup.seed)), low=0.0, high=1.0)
    label, budget = NEAR_SAMPLER, setup.plan.budget
    config = config_for(label, dict(SAMPLERS)[label], spec, setup.vocabulary, setup.plan, setup.seed)
    records = run_attacks(items, spec, setup.resources, config)
    by_id = {r["item_id"]: r for r in records}
    misplaced = sum((by_id[item.id]["outcome"] == "already_wrong") != (item.id in wrong) for item in items)
    n, attacked = len(items), len(right)
    successes = [r for r in records if r["outcome"] == "success"]
    within = {b: sum(1 for r in successes if r["queries_to_success"] <= b) for b in (1, budget)}
    failed = sum(r["outcome"] == "attack_failed" for r in records)
    summary = tces_scorer.summarise(records)
    asr_at = tces_scorer.asr_by_budget(records, budget)
    pairs = [(bool(r["clean_correct"]), r["outcome"] == "attack_failed") for r in records]
    prefix = f"{regime}, half planted wrong clean: "
    note = f"{attacked} attacked of {n} evaluated"
    checks = [
        count_check(METHOD, f"{prefix}items not already_wrong as planted", misplaced, n,
                    note=f"{len(wrong)} planted wrong (P(key) = {WRONG_KEY})"),
        exact_check(METHOD, f"{prefix}clean accuracy = attacked / evaluated", attacked / n, summary.clean_accuracy, n),
        exact_check(METHOD, f"{prefix}ASR = successes / attacked, {label}", len(successes) / attacked, summary.asr,
                    attacked, note=note),
        exact_check(METHOD, f"{prefix}ASR@1 = successes at query 1 / attacked, {label}", within[1] / attacked,
                    asr_at[0], attacked, note=note),
        exact_check(METHOD, f"{prefix}ASR@{budget} = successes within B / attacked, {label}", within[budget] / attacked,
                    asr_at[budget - 1], attacked, note=note),
        exact_check(METHOD, f"{prefix}accuracy after the attack = attack_failed / evaluated, {label}", failed / n,
                    summary.attacked_accuracy, n, note=note),
        exact_check(METHOD, f"{prefix}pairs' attacked accuracy = attack_failed / evaluated, {label}", failed / n,
                    stats.attacked_accuracy(pairs), n, note="stats.attacked_accuracy (the lm-eval shells)"),
        exact_check(METHOD, f"{prefix}pairs' flip rate = successes / attacked, {label}", len(successes) / attacked,
                    stats.flip_rate(pairs), attacked, note="stats.flip_rate over the (clean, attacked) pairs"),
    ]
    truths = setup.truths(spec, right)
    simulated = simulate(setup.world, truths, config, setup.plan.mc,
                         derive_seed(setup.seed, "tces-mc", regime, "denominators", label))
    run = Run(label, config, records, simulated, setup.world, right)
    # the samplers it could be confused with, simulated on the same attacked items (only their planted ASR is read)
    others = {other: setup.simulated_only(f"{regime}, denominators", spec, other, right)
              for other in CONFUSED_WITH[label]}
    return checks + asr_checks(prefix.rstrip(": "), run, budget, others, setup.plan.min_power)


# ----------------------------------------------------------------------------------------- driver


def regimes(spec: PlantedSpec) -> dict[str, PlantedSpec]:
    """The planted specs the checks run: near only, far (universal) only, and both, where the spec has them."""
    out: dict[str, PlantedSpec] = {}
    if spec.tces.radius is not None:
        out["near"] = spec.with_tces(universal=())
    if spec.tces.universal:
        out["universal"] = spec.with_tces(radius=None)
    if spec.tces.radius is not None and spec.tces.universal:
        out["near+universal"] = spec
    return out


@dataclass
class Setup:
    """What every regime of a validation run shares: the plan, the spec (its vocabulary the validation file),
    the items, the perturbation set as the planted rule sees it and the attack's resources."""

    plan: Plan
    seed: int
    spec: PlantedSpec
    items: list[MCQItem]
    vocabulary: Path
    world: World
    resources: TCESResources
    mix: list[MCQItem] = field(default_factory=list)  # RandS's items in the near+universal spec

    @classmethod
    def build(cls, plan: Plan, seed: int = 0, spec: PlantedSpec | None = None) -> Setup:
        # no jitter, so the key is the argmax of every unsubstituted question and DiscreteZOO's scores are exact
        spec = (spec or PlantedSpec.load()).with_target(data="none", noise=0.0)
        every = synthetic_items(max(plan.items, plan.mix_items), seed=seed + 10)  # the first are ``items``
        vocabulary = validation_vocabulary(spec, every, plan.vocabulary, seed)
        spec = spec.with_tces(vocabulary=str(vocabulary))
        resources = TCESResources.build(spec.tces.entity, str(vocabulary), spec.tces.embedding)
        return cls(plan, seed, spec, every[:plan.items], vocabulary, World.load(spec), resources,
                   every[:plan.mix_items])

    @property
    def universal(self) -> list[int]:
        return [self.world.row(name) for name in self.spec.tces.universal]

    def truths(self, spec: PlantedSpec, items: Sequence[MCQItem] | None = None) -> list[ItemTruth]:
        return [item_truth(self.world, item, spec) for item in (self.items if items is None else items)]

    def simulated_only(self, regime: str, spec: PlantedSpec, label: str, items: Sequence[MCQItem],
                       reps: int | None = None) -> Run:
        """Sampler ``label``'s planted law on ``items``, simulated only (no attack run, ``reps`` simulated runs,
        default the plan's): what a defect that puts it in another sampler's place would produce."""
        config = config_for(label, dict(SAMPLERS)[label], spec, self.vocabulary, self.plan, self.seed)
        simulated = simulate(self.world, self.truths(spec, items), config, reps or self.plan.mc,
                             derive_seed(self.seed, "tces-mc", regime, "confused", label))
        return Run(label, config, [], simulated, self.world, list(items))

    def run(self, regime: str, spec: PlantedSpec, label: str, items: Sequence[MCQItem] | None = None) -> Run:
        """Attack every item (``items``, default the setup's) with sampler ``label`` against ``spec``'s target,
        and simulate the same attack."""
        items = list(self.items if items is None else items)
        config = config_for(label, dict(SAMPLERS)[label], spec, self.vocabulary, self.plan, self.seed)
        records = run_attacks(items, spec, self.resources, config)
        simulated = simulate(self.world, self.truths(spec, items), config, self.plan.mc,
                             derive_seed(self.seed, "tces-mc", regime, label))
        return Run(label, config, records, simulated, self.world, items)


def validate_tces(size: Size = "ci", seed: int = 0, spec: PlantedSpec | None = None) -> list[Check]:
    setup = Setup.build(PLANS[size], seed, spec)
    universal = setup.universal
    checks: list[Check] = []
    clean: list[float] = []
    budgets: list[Check] = []
    for regime, regime_spec in regimes(setup.spec).items():
        # both regimes at once: the reused-entity ranking must pick the universal set out of a mix of near and
        # universal successes (RandS draws both, on more items: it succeeds on few; PDWS n > 0 mostly universal
        # ones, as the paper's Fig. 2)
        labels = [label for label, _ in SAMPLERS if regime != "near+universal" or label in ("RandS", FAR_SAMPLER)]
        runs = {label: setup.run(regime, regime_spec, label,
                                 setup.mix if regime == "near+universal" and label == "RandS" and setup.mix else None)
                for label in labels}
        clean += [tces_scorer.summarise(run.records).clean_accuracy for run in runs.values()]
        budgets += [budget_check(regime, run) for run in runs.values()]
        if regime == "near+universal":
            for run in runs.values():
                # a power is a share of simulated runs: a quarter of the plan's runs reads it to ±0.05
                others = [setup.simulated_only(regime, regime_spec, other, run.items, setup.plan.mc // 4)
                          for other in CONFUSED_WITH[run.label]]
                # no reused-entity ranking for RandS here: the items' keys repeat (20 drug names), so names near a
                # key are reused across items as often as the universal ones, and the ranking's planted interval
                # is [0, 1] at full size (96 successes; the suite reported it as a check that cannot fail)
                checks += diversity_checks(regime, run, setup.world, universal if run.label != "RandS" else [],
                                           others)
                checks.append(universal_share_check(regime, run, setup.truths(regime_spec, run.items), others))
            continue
        for run in runs.values():
            checks += asr_checks(regime, run, setup.plan.budget, runs, setup.plan.min_power)
            if run.config.sampler == "zoo":
                checks.append(zoo_walk_check(regime, run, setup.truths(regime_spec, run.items),
                                             run.config.zoo_neighbourhood))
        if regime == "near":
            checks.append(ordering_check(regime, runs[NEAR_SAMPLER], runs[FAR_SAMPLER]))
            checks += diversity_checks(regime, runs[NEAR_SAMPLER], setup.world, [],
                                       [runs[other] for other in CONFUSED_WITH[NEAR_SAMPLER]])
            checks += denominator_checks(setup, regime, regime_spec)
        else:
            checks.append(ordering_check(regime, runs[FAR_SAMPLER], runs[NEAR_SAMPLER]))
            checks += diversity_checks(regime, runs[FAR_SAMPLER], setup.world, universal,
                                       [runs[other] for other in CONFUSED_WITH[FAR_SAMPLER]])
    checks.insert(0, exact_check(METHOD, "clean accuracy, every run (key is the argmax at temperature 0)", 1.0,
                                 min(clean), setup.plan.items))
    # one row for every run's query counts (exact): the worst run decides
    worst = max(budgets, key=lambda c: c.measured)
    checks.insert(1, count_check(METHOD, f"attacks over the query budget B={setup.plan.budget}, every run",
                                 int(sum(c.measured for c in budgets)), sum(c.n for c in budgets),
                                 note=f"{len(budgets)} runs; worst: {worst.statistic}, {worst.note}"))
    return checks
