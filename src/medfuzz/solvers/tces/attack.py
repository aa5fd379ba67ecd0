"""The TCES attack engine (Algorithm 1 of the paper), harness-agnostic.

Per item: recognise the option entities of one type; skip when no distractor has one; ask the target the clean
question (already-wrong items are not attacked); pick the victim (RankSelect: for RandS/PDWS the distractor entity
nearest the key in the embedding; for DiscreteZOO a random one, the paper's "random word ranking"); then, until the
answer leaves the key or the query budget B is spent, replace the victim by a vocabulary entry drawn by the
sampler (without replacement, key and option entities excluded) and ask again. RandS/PDWS draw the whole budget's
order in one call (Gumbel-top-k) and query it in turn. DiscreteZOO spends M queries per step on gradient points
drawn in the current entity's neighbourhood; each counts against B and each can succeed on its own.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np

from medfuzz.benchmarks.answers import answer_letter
from medfuzz.benchmarks.items import MCQItem, derive_seed, item_seed
from medfuzz.benchmarks.prompts import letter_prompt
from medfuzz.errors import MedfuzzError
from medfuzz.models.failures import reply_excerpt
from medfuzz.models.logprobs import normalise
from medfuzz.models.protocol import ChatMessage, ChatModel, Generation, UsageLedger
from medfuzz.samplers.embeddings import (
    DEFAULT_ENCODER,
    Encoder,
    cache_folder,
    get_encoder,
    text_vector,
    vocabulary_vectors,
)
from medfuzz.samplers.entities import EntityMatcher, Mention, TypedOptions, substituted_item, type_options
from medfuzz.samplers.sampling import (
    CandidatePool,
    PDWSSampler,
    RandomSampler,
    nearest_available,
    neighbourhood,
    unit_cosine_distances,
    unit_rows,
    zoo_gradient,
    zoo_step_target,
)
from medfuzz.samplers.vocab import Vocabulary, load_vocabulary
from medfuzz.solvers.outcomes import Outcome
from medfuzz.solvers.tces.config import TCESConfig

log = logging.getLogger(__name__)

TARGET_ROLE = "target"


@dataclass
class TCESResources:
    """What every item of a run shares: the vocabulary, its matcher, its vectors and the encoder."""

    vocabulary: Vocabulary
    encoder: Encoder
    vectors: np.ndarray
    cache: Path | None = None  # where text vectors are kept (``embeddings.cache_folder``); None: in memory only
    matcher: EntityMatcher = field(init=False)
    unit: np.ndarray = field(init=False, repr=False)
    _texts: dict[str, np.ndarray] = field(init=False, repr=False, default_factory=dict)

    def __post_init__(self) -> None:
        self.matcher = EntityMatcher(self.vocabulary)
        # normalised once (float32, as encoders return): a key's distances are then one matrix-vector product
        self.unit = unit_rows(self.vectors, np.float32)

    @classmethod
    def build(cls, entity_type: str, vocabulary: str | Path | None = None,
              embedding: str | Encoder = DEFAULT_ENCODER, cache: Path | bool | None = None) -> TCESResources:
        vocab = load_vocabulary(entity_type, vocabulary)
        encoder = get_encoder(embedding)
        return cls(vocab, encoder, vocabulary_vectors(vocab, encoder, cache), cache_folder(cache))

    def text_vector(self, text: str) -> np.ndarray:
        """The encoder's vector of one text (``embeddings.text_vector``), kept for the process too."""
        if text not in self._texts:
            self._texts[text] = text_vector(self.encoder, text, self.cache)
        return self._texts[text]

    def embed_anchor_texts(self, items: Iterable[MCQItem]) -> int:
        """Embed now the key option texts the attacks of ``items`` will anchor on (``anchor_vector``: a key with no
        entity of the type), so that the encoder loads while the task is built, not in the middle of the run's
        first attack; returns how many texts that was."""
        texts = {item.options[item.answer] for item in map(clean_item, items)
                 if (typed := type_options(item, self.matcher)).distractors and not typed.key}
        for text in sorted(texts):
            self.text_vector(text)
        return len(texts)


@dataclass(frozen=True)
class Answer:
    letter: str | None
    score: float | None  # probability of the key (from letter log-probs) or 1/0 from the hard label
    text: str
    error: str | None = None


@dataclass(frozen=True)
class Attempt:
    """One attack query."""

    query: int  # 1-based position within the budget
    kind: str  # sample | gradient | step
    vocab_index: int
    replacement: str
    distance_to_key: float
    answer: str | None
    score: float | None
    flipped: bool
    error: str | None = None


@dataclass
class TCESResult:
    item_id: str
    outcome: Outcome
    reason: str
    config: dict[str, Any]
    key: str
    clean_answer: str | None = None
    clean_score: float | None = None
    queries_used: int = 0
    queries_to_success: int | None = None
    victim: Mention | None = None
    anchor: dict[str, Any] | None = None
    replacement: str | None = None
    replacement_distance: float | None = None
    attempts: list[Attempt] = field(default_factory=list)
    modified_item: MCQItem | None = None
    usage: dict[str, dict[str, int]] = field(default_factory=dict)
    typed: dict[str, list[str]] = field(default_factory=dict)

    @property
    def clean_correct(self) -> bool | None:
        return None if self.clean_answer is None else self.clean_answer == self.key

    @property
    def target_answers(self) -> list[str | None]:
        return [self.clean_answer, *(a.answer for a in self.attempts)]

    def to_dict(self) -> dict[str, Any]:
        return {
            "item_id": self.item_id,
            "outcome": self.outcome.value,
            "reason": self.reason,
            "config": self.config,
            "key": self.key,
            "clean_answer": self.clean_answer,
            "clean_score": self.clean_score,
            "clean_correct": self.clean_correct,
            "queries_used": self.queries_used,
            "queries_to_success": self.queries_to_success,
            "victim": self.victim.to_dict() if self.victim else None,
            "anchor": self.anchor,
            "replacement": self.replacement,
            "replacement_distance": self.replacement_distance,
            "target_answers": self.target_answers,
            "attempts": [asdict(a) for a in self.attempts],
            "modified_item": self.modified_item.to_record() if self.modified_item else None,
            "usage": self.usage,
            "typed": self.typed,
        }


def target_messages(item: MCQItem) -> list[ChatMessage]:
    return [ChatMessage("user", letter_prompt(item))]


async def ask(model: ChatModel, item: MCQItem, config: TCESConfig, ledger: UsageLedger) -> Answer:
    """The target's answer to ``item``. A failed, empty, refused or unparseable reply is asked again with a new
    seed (``config.max_retries`` times) before it is an error (the item then ends as an LLM error); the first
    try uses ``config.seed`` itself. Retries are not attack queries: they do not count against the budget."""
    problem, text = "", ""
    for attempt in range(config.max_retries + 1):
        seed = config.seed if attempt == 0 else derive_seed(config.seed, "retry", attempt)
        generation = await model.generate(target_messages(item), max_tokens=config.max_tokens,
                                          temperature=config.temperature, seed=seed, letters=item.letters)
        ledger.record(TARGET_ROLE, generation)
        text = generation.text
        if not generation.ok:
            problem = generation.error or "error"
            continue
        letter = answer_letter(generation.text, item.letters, item.clean_options())
        if letter is not None:
            return _answer(item, letter, generation)
        # an empty reply is not an answer that failed to parse (a time-out or a cut-off reply looks like this)
        problem = (f"unparseable answer: {reply_excerpt(generation.text)}" if generation.text.strip()
                   else "empty reply (no text: a time-out, a cut-off or a blank answer)")
    return Answer(None, None, text[:200], problem)


def _answer(item: MCQItem, letter: str, generation: Generation) -> Answer:
    score = 1.0 if letter == item.answer else 0.0
    if generation.letter_logprobs:
        with contextlib.suppress(ValueError):  # no letter with positive probability: keep the hard label
            score = normalise(generation.letter_logprobs, item.letters)[item.answer]
    return Answer(letter, score, generation.text)


def clean_item(item: MCQItem) -> MCQItem:
    """Prompt-ready texts, so recognised spans index the very text the target sees."""
    return item.with_options(item.clean_options()).with_question(item.clean_question())


def anchor_vector(typed: TypedOptions, item: MCQItem, resources: TCESResources,
                  victims: tuple[Mention, ...]) -> tuple[np.ndarray, dict[str, Any], Mention | None]:
    """The key's anchor: its own entity of the type (the one nearest any victim candidate when it has several)
    or, when it has none, the whole key option text. Also returns the candidate nearest the key."""
    unit = resources.unit
    candidates = unit[[m.index for m in victims]]
    if typed.key:
        key_vectors = unit[[m.index for m in typed.key]]
        similarity = key_vectors @ candidates.T
        k, d = np.unravel_index(int(np.argmax(similarity)), similarity.shape)
        key_mention = typed.key[int(k)]
        anchor = {"source": "entity", "text": key_mention.text, "vocab_name": key_mention.name}
        return resources.vectors[key_mention.index], anchor, victims[int(d)]
    vector = resources.text_vector(item.options[item.answer])
    d = int(np.argmin(unit_cosine_distances(vector, candidates)))
    return vector, {"source": "option_text", "text": item.options[item.answer], "vocab_name": None}, victims[d]


def prepare(typed: TypedOptions, item: MCQItem, resources: TCESResources, config: TCESConfig,
            rng: np.random.Generator) -> tuple[Mention, dict[str, Any], np.ndarray, CandidatePool]:
    """RankSelect and the sampling state: the victim, anchor evidence, cosine distances of every vocabulary
    entry to the key, and the candidate pool.

    The victim is chosen among ``typed.victims`` (options that are the entity itself preferred): for RandS/PDWS
    the one nearest the key (paper §4.2); for DiscreteZOO one at random from ``rng`` (the paper's "random word
    ranking", §4.3 (i))."""
    victims = typed.victims
    vector, anchor, nearest = anchor_vector(typed, item, resources, victims)
    if config.sampler == "zoo":
        victim, rule = victims[int(rng.integers(len(victims)))], "random"
    else:
        victim, rule = nearest, "nearest_to_key"
    distances = unit_cosine_distances(vector, resources.unit)
    anchor = {**anchor, "victim_rule": rule, "victim_distance": float(distances[victim.index])}
    return victim, anchor, distances, CandidatePool(len(resources.vocabulary), typed.excluded_indices())


def item_rng(config: TCESConfig, item: MCQItem) -> np.random.Generator:
    """The item's sampling generator: seeded by run seed and item id, the same in every harness and process."""
    return np.random.default_rng(item_seed(config.seed, item.id))


@dataclass(frozen=True)
class Substitution:
    """A model-free single substitution (what the lm-eval transform tasks show the model)."""

    victim: Mention
    anchor: dict[str, Any]
    vocab_index: int
    replacement: str
    distance_to_key: float
    item: MCQItem


def no_entity_reason(typed: TypedOptions, entity: str, matcher: EntityMatcher) -> str:
    """Why an item cannot be attacked: no distractor names an entity of the type (TCES replaces one there), and
    what the options do hold of that type."""
    base = f"no {entity} entity in any distractor"
    if typed.key:
        return f"{base} (only the key, {typed.key_letter}, names one: {', '.join(sorted({m.text for m in typed.key}))})"
    if typed.shown:
        names = sorted({matcher.vocabulary.names[i] for i in typed.shown})[:3]
        return f"{base} ({', '.join(names)} only as part of a longer name or word)"
    return f"{base} (no option names one)"


@cache
def vocabulary_matcher(entity: str, vocabulary: str | None) -> EntityMatcher:
    """The matcher of an entity type's vocabulary alone (no encoder, no vectors: what counting attackable items
    needs), built once per process."""
    return EntityMatcher(load_vocabulary(entity, vocabulary))


def skip_reason(item: MCQItem, matcher: EntityMatcher, entity: str) -> str | None:
    """Why ``item`` cannot be attacked for ``entity`` (None: it can: an entity of the type in a distractor)."""
    typed = type_options(clean_item(item), matcher)
    return None if typed.distractors else no_entity_reason(typed, entity, matcher)


def count_attackable(benchmark: str, data_name: str, items: Iterable[MCQItem], config: TCESConfig,
                     shown: int = 20) -> dict[str, Any]:
    """How many ``items`` TCES can attack (an entity of the type in a distractor), logged with the reason of each
    item it cannot (``log_attackable``); the counts and every reason as ``{items, attackable, skipped: {item id:
    reason}}``."""
    skipped: dict[str, str] = {}
    total = 0
    for item in items:
        total += 1
        why = skip_reason(item, vocabulary_matcher(config.entity, config.vocabulary), config.entity)
        if why is not None:
            skipped[item.id] = why
    return log_attackable(f"tces {benchmark} ({data_name}, {config.entity})", total, skipped, config.entity, shown)


def log_attackable(label: str, total: int, skipped: dict[str, str], entity: str, shown: int = 20) -> dict[str, Any]:
    """Log how many of ``total`` items can be attacked and why each of the ``skipped`` ones cannot (one line each:
    the first ``shown`` at info level, the rest at debug); the counts and every reason as ``{items, attackable,
    skipped}``."""
    # a warning when items are left out, so both harnesses' consoles show it (the reasons follow at info level)
    (log.warning if skipped else log.info)(
        "%s: %d of %d items attackable (a %s entity in a distractor); %d left out, each for its reason: %s", label,
        total - len(skipped), total, entity, len(skipped), "; ".join(f"{k}: {v}" for k, v in list(skipped.items())[:3])
        + ("; ..." if len(skipped) > 3 else "") if skipped else "none")
    for number, (item_id, why) in enumerate(skipped.items()):
        if number == shown:
            log.info("%s: %d more items skipped (their reasons at debug level)", label, len(skipped) - shown)
        (log.info if number < shown else log.debug)("%s: item %s skipped: %s", label, item_id, why)
    if total and len(skipped) == total:
        log.warning("%s: none of the %d items has a %s entity in a distractor: TCES attacks nothing here", label,
                    total, entity)
    return {"items": total, "attackable": total - len(skipped), "skipped": skipped}


def first_substitution(item: MCQItem, resources: TCESResources, config: TCESConfig) -> Substitution | str:
    """The substitution a RandS/PDWS attack of ``item`` would try first (same seed, same draw), or the reason
    there is none. DiscreteZOO needs the target's scores and has no model-free first step."""
    if config.sampler == "zoo":
        raise MedfuzzError("the model-free single substitution supports sampler rands or pdws, not zoo")
    item = clean_item(item)
    typed = type_options(item, resources.matcher)
    if not typed.distractors:
        return no_entity_reason(typed, config.entity, resources.matcher)
    rng = item_rng(config, item)
    victim, anchor, distances, pool = prepare(typed, item, resources, config, rng)
    if len(pool) == 0:
        return "no candidate entity left"
    sampler = RandomSampler() if config.sampler == "rands" else PDWSSampler(config.n)
    index = int(sampler.draw_many(pool, distances, 1, rng)[0])
    replacement = resources.vocabulary.names[index]
    return Substitution(victim, anchor, index, replacement, float(distances[index]),
                        substituted_item(item, victim, replacement))


class _Attack:
    """The state of one item's attack: the budget, the pool, the ledger and the attempts so far."""

    def __init__(self, item: MCQItem, victim: Mention, distances: np.ndarray, pool: CandidatePool,
                 model: ChatModel, resources: TCESResources, config: TCESConfig, ledger: UsageLedger) -> None:
        self.item, self.victim, self.distances, self.pool = item, victim, distances, pool
        self.model, self.resources, self.config, self.ledger = model, resources, config, ledger
        self.attempts: list[Attempt] = []
        self.last_item: MCQItem | None = None

    @property
    def remaining(self) -> int:
        return self.config.budget - len(self.attempts)

    async def query(self, index: int, kind: str) -> Attempt:
        replacement = self.resources.vocabulary.names[index]
        modified = substituted_item(self.item, self.victim, replacement)
        self.last_item = modified
        answer = await ask(self.model, modified, self.config, self.ledger)
        attempt = Attempt(
            query=len(self.attempts) + 1, kind=kind, vocab_index=index, replacement=replacement,
            distance_to_key=float(self.distances[index]), answer=answer.letter, score=answer.score,
            flipped=answer.error is None and answer.letter != self.item.answer, error=answer.error,
        )
        self.attempts.append(attempt)
        return attempt

    async def run_sampling(self, rng: np.random.Generator) -> Attempt | None:
        sampler = RandomSampler() if self.config.sampler == "rands" else PDWSSampler(self.config.n)
        if len(self.pool) == 0:
            return None
        # the whole budget's draw order in one call; the first b draws do not depend on B
        for index in sampler.draw_many(self.pool, self.distances, self.remaining, rng):
            attempt = await self.query(int(index), "sample")
            if attempt.error or attempt.flipped:
                return attempt
        return None

    async def run_zoo(self, rng: np.random.Generator, clean_score: float) -> Attempt | None:
        vectors = self.resources.vectors
        unit = self.resources.unit  # normalised once per run, not at every step
        anchor, anchor_score = vectors[self.victim.index].astype(np.float64), clean_score
        last_gradient = np.zeros_like(anchor)
        uniform = RandomSampler()
        while self.remaining > 0 and len(self.pool) > 0:
            points, scores = [], []
            # M gradient points, drawn uniformly among the available entries nearest the current entity (paper
            # App. E; the similarity threshold of the original DiscreteZOO is off, §4.3 (ii)), leaving one query
            # for the step; with a single query left, the previous gradient (zero at first) decides the step
            m = min(self.config.zoo_m, self.remaining - 1, len(self.pool) - 1)
            near = CandidatePool(len(vectors), ())
            near.available[:] = False
            near.available[neighbourhood(anchor, unit, self.pool, self.config.zoo_neighbourhood, unit=True)] = True
            drawn = uniform.draw_many(near, None, m, rng) if m > 0 else []
            self.pool.remove(np.asarray(drawn, dtype=np.int64))
            for index in drawn:
                attempt = await self.query(int(index), "gradient")
                if attempt.error or attempt.flipped:
                    return attempt
                points.append(vectors[attempt.vocab_index])
                scores.append(attempt.score)
            gradient = (zoo_gradient(anchor, anchor_score, np.array(points), np.array(scores))
                        if points else last_gradient)
            index = nearest_available(zoo_step_target(anchor, gradient, self.config.zoo_step), unit, self.pool,
                                      unit=True)
            self.pool.remove(index)
            attempt = await self.query(index, "step")
            if attempt.error or attempt.flipped:
                return attempt
            anchor, anchor_score, last_gradient = vectors[index].astype(np.float64), attempt.score, gradient
        return None


async def attack_item(item: MCQItem, model: ChatModel, resources: TCESResources, config: TCESConfig) -> TCESResult:
    """Attack one item. Never raises for model-side trouble: that is an ``llm_error`` outcome."""
    item = clean_item(item)
    ledger = UsageLedger()
    result = TCESResult(item_id=item.id, outcome=Outcome.NO_ENTITY, reason="", config=asdict(config),
                        key=item.answer)
    typed = type_options(item, resources.matcher)
    result.typed = {"key": [m.text for m in typed.key], "distractors": [m.text for m in typed.distractors]}
    if not typed.distractors:
        result.reason = no_entity_reason(typed, config.entity, resources.matcher)
        return result
    clean = await ask(model, item, config, ledger)
    result.usage = ledger.as_dict()
    result.clean_answer, result.clean_score = clean.letter, clean.score
    if clean.error is not None:
        result.outcome, result.reason = Outcome.LLM_ERROR, f"clean question: {clean.error}"
        return result
    if clean.letter != item.answer:
        result.outcome, result.reason = Outcome.ALREADY_WRONG, f"clean answer {clean.letter}, key {item.answer}"
        return result

    rng = item_rng(config, item)
    victim, anchor, distances, pool = prepare(typed, item, resources, config, rng)
    result.victim, result.anchor = victim, anchor
    attack = _Attack(item, victim, distances, pool, model, resources, config, ledger)
    if config.sampler == "zoo":
        final = await attack.run_zoo(rng, float(clean.score if clean.score is not None else 1.0))
    else:
        final = await attack.run_sampling(rng)

    result.attempts = attack.attempts
    result.queries_used = len(attack.attempts)
    result.modified_item = attack.last_item
    result.usage = ledger.as_dict()
    if final is not None and final.error is not None:
        result.outcome, result.reason = Outcome.LLM_ERROR, f"query {final.query}: {final.error}"
    elif final is not None and final.flipped:
        result.outcome, result.reason = Outcome.SUCCESS, f"answer {final.answer} at query {final.query}"
        result.queries_to_success = final.query
        result.replacement, result.replacement_distance = final.replacement, final.distance_to_key
    else:
        result.outcome = Outcome.ATTACK_FAILED
        result.reason = "budget exhausted" if attack.remaining == 0 else "no candidate entity left"
    return result

