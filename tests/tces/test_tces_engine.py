"""The TCES engine against scripted targets: every branch (flip at query i, budget exhausted, already wrong, no
entity, LLM errors), RankSelect, exclusions, seeds and DiscreteZOO's query accounting."""

from __future__ import annotations

import hashlib
import math
from pathlib import Path

import numpy as np
import pytest

from medfuzz.benchmarks import MCQItem, load_items
from medfuzz.benchmarks.answers import answer_letter
from medfuzz.errors import MedfuzzError
from medfuzz.models import Generation, ScriptedChatModel
from medfuzz.samplers.sampling import CandidatePool, nearest_available, zoo_gradient, zoo_step_target
from medfuzz.samplers.vocab import load_drugcentral, normalise_name
from medfuzz.scorers.tces import asr_by_budget, summarise
from medfuzz.solvers.tces.attack import Outcome, TCESConfig, TCESResources, attack_item

DIM = 6


class TableEncoder:
    """A deterministic toy embedding: chosen vectors for a few names, seeded random ones for the rest."""

    name = "table"

    def __init__(self, table: dict[str, list[float]]) -> None:
        self.table = {normalise_name(k): np.asarray(v, dtype=np.float64) for k, v in table.items()}
        self.encoded: list[str] = []

    def encode(self, texts):
        self.encoded.extend(texts)
        rows = []
        for text in texts:
            vector = self.table.get(normalise_name(text))
            if vector is None:
                seed = int.from_bytes(hashlib.sha256(text.lower().encode()).digest()[:4], "big")
                vector = np.random.default_rng(seed).normal(size=DIM)
            rows.append(vector / np.linalg.norm(vector))
        return np.array(rows, dtype=np.float32)


@pytest.fixture
def resources(fixtures: Path) -> TCESResources:
    vocab = load_drugcentral(fixtures / "tces" / "drugs_drugcentral.csv")
    encoder = TableEncoder({
        "ceftriaxone": [1, 0, 0, 0, 0, 0],
        "ciprofloxacin": [0.9, 0.3, 0, 0, 0, 0],  # nearest distractor to the key
        "gentamicin": [0.2, 1, 0, 0, 0, 0],
        "trimethoprim": [0, 0, 1, 0, 0, 0],
    })
    return TCESResources(vocab, encoder, encoder.encode(vocab.names))


@pytest.fixture
def item(fixtures: Path) -> MCQItem:
    return load_items("medqa", fixtures / "medqa_small.jsonl")[0]  # A Gentamicin B Ciprofloxacin C* D Trimethoprim


def config(**kwargs) -> TCESConfig:
    return TCESConfig(**{"sampler": "pdws", "n": -5.0, "budget": 4, "seed": 0, **kwargs})


async def test_flip_at_query_three(item, resources) -> None:
    model = ScriptedChatModel(["C", "C", "C. Ceftriaxone", "B"])
    result = await attack_item(item, model, resources, config(budget=8))
    assert result.outcome is Outcome.SUCCESS
    assert result.queries_used == result.queries_to_success == 3
    assert result.target_answers == ["C", "C", "C", "B"]
    assert result.victim.letter == "B" and result.victim.text == "Ciprofloxacin"  # RankSelect
    assert result.anchor["source"] == "entity" and result.anchor["text"] == "Ceftriaxone"
    final = result.attempts[-1]
    assert result.replacement == final.replacement and result.replacement_distance == final.distance_to_key
    expected_text = final.replacement[:1].upper() + final.replacement[1:]  # "Ciprofloxacin" is capitalised
    assert result.modified_item.options == {**item.options, "B": expected_text}
    assert model.calls[-1].messages[0].content.count(expected_text) == 1
    assert result.usage["target"]["calls"] == 4
    record = result.to_dict()
    assert record["outcome"] == "success" and record["victim"]["text"] == "Ciprofloxacin"
    assert record["modified_item"]["options"]["B"] == expected_text


async def test_budget_exhausted(item, resources) -> None:
    model = ScriptedChatModel(["C"] * 4)
    result = await attack_item(item, model, resources, config(budget=3))
    assert result.outcome is Outcome.ATTACK_FAILED and result.reason == "budget exhausted"
    assert result.queries_used == 3 and result.queries_to_success is None and result.replacement is None
    assert len(model.calls) == 4 and result.modified_item is not None


async def test_already_wrong_is_not_attacked(item, resources) -> None:
    model = ScriptedChatModel(["A"])
    result = await attack_item(item, model, resources, config())
    assert result.outcome is Outcome.ALREADY_WRONG and result.clean_answer == "A"
    assert result.queries_used == 0 and len(model.calls) == 1 and result.victim is None


async def test_no_entity_spends_no_query(fixtures, resources) -> None:
    item = load_items("medqa", fixtures / "medqa_small.jsonl")[4]  # Hypoperfusion, Hyperglycemia, ...
    model = ScriptedChatModel(["A"])
    result = await attack_item(item, model, resources, config())
    assert result.outcome is Outcome.NO_ENTITY and "no drugs entity" in result.reason
    assert model.calls == [] and result.clean_answer is None


@pytest.mark.parametrize(("replies", "where"), [
    ([RuntimeError("HTTP 500")] * 3, "clean question: RuntimeError: HTTP 500"),
    (["I cannot answer medical questions."] * 3, "clean question: unparseable answer"),
    ([""] * 3, "clean question: empty reply"),
    (["C", "C", *[RuntimeError("timeout")] * 3], "query 2: RuntimeError: timeout"),
    (["C", *[Generation(text="", error="refusal: content filter")] * 3], "query 1: refusal"),
])
async def test_llm_errors_are_outcomes(item, resources, replies, where) -> None:
    """A query is an LLM error only after max_retries (default 2) more tries also failed."""
    result = await attack_item(item, ScriptedChatModel(list(replies)), resources, config(budget=5))
    assert result.outcome is Outcome.LLM_ERROR
    assert result.reason.startswith(where)
    assert result.usage["target"]["calls"] == len(replies)


@pytest.mark.parametrize("bad", ["", "I cannot answer medical questions.", "H",
                                 Generation(text="", error="refusal: content filter"), RuntimeError("HTTP 503")])
async def test_one_bad_reply_is_retried_with_a_new_seed(item, resources, bad) -> None:
    model = ScriptedChatModel([bad, "C", "C"])
    result = await attack_item(item, model, resources, config(budget=1))
    assert result.outcome is not Outcome.LLM_ERROR and result.clean_answer == "C"
    first, retry = model.calls[0].options["seed"], model.calls[1].options["seed"]
    assert first == config(budget=1).seed and retry != first
    assert result.queries_used == 1  # the retry is not an attack query


async def test_no_retry_when_max_retries_is_zero(item, resources) -> None:
    result = await attack_item(item, ScriptedChatModel([""]), resources, config(budget=1, max_retries=0))
    assert result.outcome is Outcome.LLM_ERROR and result.usage["target"]["calls"] == 1


async def test_candidates_exclude_options_and_never_repeat(item, resources) -> None:
    pool_size = len(resources.vocabulary) - 4  # the four option drugs are excluded
    model = ScriptedChatModel(["C"] * (pool_size + 1))
    result = await attack_item(item, model, resources, config(budget=pool_size + 5, n=3.0))
    drawn = [a.vocab_index for a in result.attempts]
    assert len(drawn) == len(set(drawn)) == pool_size
    assert not {0, 1, 2, 3} & set(drawn)
    assert result.outcome is Outcome.ATTACK_FAILED and result.reason == "no candidate entity left"


async def test_seeded_and_regime_sensitive(item, resources) -> None:
    async def drawn(**kwargs) -> list[int]:
        result = await attack_item(item, ScriptedChatModel(["C"] * 9), resources, config(budget=8, **kwargs))
        return [a.vocab_index for a in result.attempts]

    assert await drawn(seed=3) == await drawn(seed=3)
    assert await drawn(seed=3) != await drawn(seed=4)
    near = [a for a in (await attack_item(item, ScriptedChatModel(["C"] * 9), resources,
                                          config(budget=8, n=-50.0))).attempts]
    far = [a for a in (await attack_item(item, ScriptedChatModel(["C"] * 9), resources,
                                         config(budget=8, n=50.0))).attempts]
    assert max(a.distance_to_key for a in near) < min(a.distance_to_key for a in far)


async def test_key_without_entity_anchors_on_the_key_text(resources) -> None:
    item = MCQItem("k", "Which is best?", {"A": "Watchful waiting", "B": "Warfarin", "C": "Heparin", "D": "Rest"}, "A")
    result = await attack_item(item, ScriptedChatModel(["A", "B"]), resources, config())
    assert result.anchor["source"] == "option_text" and result.anchor["text"] == "Watchful waiting"
    assert "Watchful waiting" in resources.encoder.encoded
    assert result.victim.text in ("Warfarin", "Heparin") and result.outcome is Outcome.SUCCESS


async def test_anchor_texts_are_embedded_before_the_run_once_and_read_back_from_the_cache(
        item, resources, tmp_path: Path) -> None:
    """Only keys without an entity of the type are embedded (once each, alone), before any attack; a later
    process with the same cache reads them without calling its encoder, and every attack is the same."""
    no_key_entity = MCQItem("k", "Which is best?", {"A": "Watchful waiting", "B": "Warfarin", "C": "Heparin",
                                                   "D": "Rest"}, "A")
    no_entity_at_all = MCQItem("n", "Which?", {"A": "Rest", "B": "Ice", "C": "Sleep", "D": "Walk"}, "B")
    cold = TCESResources(resources.vocabulary, resources.encoder, resources.vectors, cache=tmp_path)
    resources.encoder.encoded.clear()
    assert cold.embed_anchor_texts([item, no_key_entity, no_key_entity, no_entity_at_all]) == 1
    assert resources.encoder.encoded == ["Watchful waiting"]  # one text, in a batch of its own
    direct = resources.encoder.encode(["Watchful waiting"])[0]
    files = list((tmp_path / "texts").rglob("*.npy"))
    assert len(files) == 1 and np.array_equal(np.load(files[0]), direct)
    first = await attack_item(no_key_entity, ScriptedChatModel(["A", "A", "B"]), cold, config())

    fresh_encoder = TableEncoder({})
    warm = TCESResources(resources.vocabulary, fresh_encoder, resources.vectors, cache=tmp_path)
    again = await attack_item(no_key_entity, ScriptedChatModel(["A", "A", "B"]), warm, config())
    assert fresh_encoder.encoded == []  # read from the cache: the encoder never ran
    assert again.to_dict() == first.to_dict()
    files[0].write_bytes(b"not numpy")  # a damaged entry is recomputed, not trusted
    assert np.array_equal(TCESResources(resources.vocabulary, fresh_encoder, resources.vectors,
                                        cache=tmp_path).text_vector("Watchful waiting"), direct)
    assert fresh_encoder.encoded == ["Watchful waiting"]


def _with_key_probability(p_key: float, answer: str = "C") -> Generation:
    others = (1 - p_key) / 3
    logprobs = {letter: math.log(p_key if letter == "C" else others) for letter in "ABCD"}
    return Generation(text=answer, letter_logprobs=logprobs)


async def test_zoo_counts_gradient_queries_and_steps_by_eq7(item, resources) -> None:
    scores = [0.9, 0.8, 0.6, 0.7, 0.5, 0.75, 0.65]
    model = ScriptedChatModel([_with_key_probability(s) for s in scores])
    cfg = config(sampler="zoo", budget=6, zoo_m=2, zoo_step=0.5)
    result = await attack_item(item, model, resources, cfg)
    assert result.outcome is Outcome.ATTACK_FAILED and result.queries_used == 6
    assert [a.kind for a in result.attempts] == ["gradient", "gradient", "step"] * 2
    assert [a.score for a in result.attempts] == pytest.approx(scores[1:])
    # replay the first step by hand: anchor = victim vector, anchor score = clean score
    vectors = resources.vectors
    anchor = vectors[result.victim.index].astype(np.float64)
    g1, g2 = result.attempts[0], result.attempts[1]
    gradient = zoo_gradient(anchor, 0.9, vectors[[g1.vocab_index, g2.vocab_index]], np.array([g1.score, g2.score]))
    pool = CandidatePool(len(vectors), {0, 1, 2, 3, g1.vocab_index, g2.vocab_index})
    assert result.attempts[2].vocab_index == nearest_available(zoo_step_target(anchor, gradient, 0.5), vectors, pool)


async def test_zoo_success_on_a_gradient_point(item, resources) -> None:
    model = ScriptedChatModel(["C", "C", "A"])
    result = await attack_item(item, model, resources, config(sampler="zoo", budget=6, zoo_m=3))
    assert result.outcome is Outcome.SUCCESS and result.queries_to_success == 2
    assert result.attempts[-1].kind == "gradient"


async def test_zoo_budget_smaller_than_a_step(item, resources) -> None:
    result = await attack_item(item, ScriptedChatModel(["C"] * 3), resources,
                               config(sampler="zoo", budget=2, zoo_m=5))
    assert [a.kind for a in result.attempts] == ["gradient", "step"]


def test_parse_letter_and_config_validation() -> None:
    assert answer_letter("B", "ABCD") == "B"
    assert answer_letter("The answer is (D) because", "ABCD") == "D"
    assert answer_letter("A.", "ABCD") == "A"
    assert answer_letter("Answer: E", "ABCD") is None
    assert answer_letter("I think so", "ABCD") is None  # the pronoun "I" is not an option letter here
    options = {"A": "Cyclic vomiting syndrome", "B": "Gastroenteritis", "C": "Gastroenteritis", "D": "Croup"}
    assert answer_letter("Cyclic vomiting syndrome.", "ABCD", options) == "A"  # the option text, repeated
    assert answer_letter("croup", "ABCD", options) == "D"
    assert answer_letter("Gastroenteritis", "ABCD", options) is None  # two options read the same: ambiguous
    assert answer_letter("vomiting", "ABCD", options) is None
    with pytest.raises(MedfuzzError, match="sampler"):
        TCESConfig(sampler="beam")
    with pytest.raises(MedfuzzError, match="budget"):
        TCESConfig(budget=0)
    with pytest.raises(MedfuzzError, match="entity must be one of"):
        TCESConfig(entity="genes")


async def test_run_summary_and_curve(fixtures, resources) -> None:
    items = load_items("medqa", fixtures / "medqa_small.jsonl")
    # item 0: success at query 2; item 2 (key D, Trazodone): already wrong; item 3 (option C mentions
    # ceftazidime): survives 4 queries; items 1 and 4: no drug entity
    model = ScriptedChatModel(["C", "C", "B", "A", "B", "B", "B", "B", "B"])
    results = [await attack_item(item, model, resources, config(budget=4)) for item in items]
    outcomes = [r.outcome.value for r in results]
    assert outcomes == ["success", "no_entity", "already_wrong", "attack_failed", "no_entity"]
    assert results[3].victim.text == "ceftazidime"
    assert results[3].modified_item.options["C"].startswith("Begin intravenous treatment with ")
    summary = summarise(r.to_dict() for r in results)
    assert (summary.evaluated, summary.clean_correct, summary.successes, summary.no_entity) == (3, 2, 1, 2)
    assert summary.clean_accuracy == pytest.approx(2 / 3) and summary.attacked_accuracy == pytest.approx(1 / 3)
    assert summary.asr == 0.5 and summary.mean_queries_to_success == 2.0 and summary.gini_simpson == 0.0
    assert asr_by_budget([r.to_dict() for r in results], 3) == [0.0, 0.5, 0.5]


async def test_zoo_gradient_points_come_from_the_current_entitys_neighbourhood(item, resources) -> None:
    """Issue 10 item 7 (paper App. E): the M gradient points of each step are drawn among the zoo_neighbours
    available entries nearest the current entity (the victim first, then each step's entity)."""
    from medfuzz.samplers.sampling import neighbourhood

    model = ScriptedChatModel([_with_key_probability(s) for s in (0.9, 0.8, 0.6, 0.7, 0.5, 0.75, 0.65)])
    cfg = config(sampler="zoo", budget=6, zoo_m=2, zoo_neighbours=3, seed=1)
    result = await attack_item(item, model, resources, cfg)
    vectors, attempts = resources.vectors, result.attempts
    used: set[int] = set()
    current = vectors[result.victim.index]
    for step in range(2):
        gradient_points = attempts[3 * step: 3 * step + 2]
        pool = CandidatePool(len(vectors), {0, 1, 2, 3, *used})
        near = set(neighbourhood(current, vectors, pool, 3).tolist())
        assert {a.vocab_index for a in gradient_points} <= near
        used |= {a.vocab_index for a in attempts[3 * step: 3 * step + 3]}
        current = vectors[attempts[3 * step + 2].vocab_index]
    assert TCESConfig(zoo_m=4).zoo_neighbourhood == 20  # default: 5·M, as the authors' code
    with pytest.raises(MedfuzzError, match="zoo_neighbours must be at least zoo_m"):
        TCESConfig(zoo_m=4, zoo_neighbours=3)


async def test_zoo_victim_is_a_random_distractor_entity(item, resources) -> None:
    """Issue 10 item 8 (paper §4.3 (i), random word ranking): DiscreteZOO's victim is drawn at random (seeded)
    among the type-matched distractor entities; RandS/PDWS keep the one nearest the key."""
    async def victim(**kwargs) -> tuple[str, str]:
        result = await attack_item(item, ScriptedChatModel(["C", "A"]), resources, config(budget=2, **kwargs))
        return result.victim.text, result.anchor["victim_rule"]

    zoo = {await victim(sampler="zoo", seed=seed) for seed in range(12)}
    assert {text for text, _ in zoo} == {"Gentamicin", "Ciprofloxacin", "Trimethoprim"}
    assert {rule for _, rule in zoo} == {"random"}
    assert await victim(sampler="zoo", seed=5) == await victim(sampler="zoo", seed=5)
    for sampler in ("pdws", "rands"):
        assert {await victim(sampler=sampler, seed=seed) for seed in range(4)} == {("Ciprofloxacin",
                                                                                     "nearest_to_key")}
