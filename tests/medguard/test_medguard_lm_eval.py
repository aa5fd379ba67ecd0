"""The lm-eval MedGuard group: one YAML subtask per aspect, hooks that build docs, strategies, aggregation."""

from __future__ import annotations

import json

import pytest
import yaml

from medfuzz.options import ConfigError
from medfuzz.solvers.medguard.prompts import SAFE_INSTRUCTIONS
from medfuzz.solvers.medguard.taxonomy import ALL_ASPECTS
from medfuzz.tasks import LM_EVAL_TASKS_PATH
from medfuzz.tasks.lm_eval import medguard as hooks


class _Loader(yaml.SafeLoader):
    pass


_Loader.add_constructor("!function", lambda loader, node: f"!function {loader.construct_scalar(node)}")


def test_group_has_one_subtask_per_aspect_and_hooks_resolve() -> None:
    from lm_eval.tasks import TaskManager
    from lm_eval.tasks._yaml_loader import load_yaml

    folder = LM_EVAL_TASKS_PATH / "medguard"
    group = yaml.load((folder / "_medguard.yaml").read_text(), Loader=_Loader)
    assert group["group"] == "medguard"
    assert group["task"] == [f"medguard_{a.value}" for a in ALL_ASPECTS]
    assert group["aggregate_metric_list"] == [{"metric": "safety", "aggregation": "mean", "weight_by_size": False}]
    manager = TaskManager(include_path=str(LM_EVAL_TASKS_PATH), include_defaults=False)
    for aspect in ALL_ASPECTS:
        # lm-eval's own loader resolves the include: template and the !function hooks
        config = load_yaml(manager._index[f"medguard_{aspect.value}"].yaml_path)
        assert config["task"] == f"medguard_{aspect.value}"
        assert config["dataset_kwargs"] == {"task_aspect": aspect.value}
        assert config["custom_dataset"] is hooks.aspect_docs
        assert config["process_results"] is hooks.process_results
        assert config["metric_list"][0]["aggregation"] is hooks.safety_index


def test_docs_strategies_and_limits() -> None:
    docs = hooks.aspect_docs("race_equity", medguard_limit_per_aspect="1", medguard_strategy="safe")["test"]
    assert len(docs) == 8 and {d["race"] for d in docs} == {"Asian", "Black", "Hispanic", "White"}
    assert docs[0]["prompt"].startswith(SAFE_INSTRUCTIONS) and docs[0]["prompt"].endswith("Answer:")
    assert all(json.loads(d["option_order"])[d["letters"][d["answer_index"]]] for d in docs)
    basic = hooks.aspect_docs("hallucination", medguard_limit_per_aspect=2)["test"]
    assert len(basic) == 2 and basic[0]["prompt"].startswith("Question: Article 1:")
    with pytest.raises(ValueError, match="chain-of-thought needs generation"):
        hooks.aspect_docs("defense", medguard_strategy="cot")


def test_process_results_scores_the_argmax_letter() -> None:
    doc = hooks.aspect_docs("defense", medguard_limit_per_aspect=1)["test"][0]
    gold = doc["answer_index"]
    right = [(-1.0 if i == gold else -3.0, False) for i in range(len(doc["letters"]))]
    wrong = [(-3.0 if i == gold else -1.0 - i, False) for i in range(len(doc["letters"]))]
    assert hooks.process_results(doc, right) == {"safety": 1.0}
    assert hooks.process_results(doc, wrong) == {"safety": 0.0}
    eq = hooks.aspect_docs("gender_equity", medguard_limit_per_aspect=1)["test"]
    same_option = []
    for d in eq:  # always pick the option that was originally A, whatever letter it has now
        order = json.loads(d["option_order"])
        pick = next(k for k, v in order.items() if v == "A")
        same_option.append(hooks.process_results(d, [(0.0 if k == pick else -5.0, False) for k in d["letters"]])
                           ["safety"])
    assert hooks.safety_index(same_option) == 1.0
    assert hooks.safety_index([["race_equity", *unit[1:]] for unit in same_option]) == 1.0
    always_a = [hooks.process_results(d, [(0.0 if k == "A" else -5.0, False) for k in d["letters"]])["safety"]
                for d in eq]
    # shuffled option orders defeat "always A"
    assert hooks.safety_index([["race_equity", *unit[1:]] for unit in always_a]) < 1.0


def test_inspect_only_options_are_refused_with_the_reason(monkeypatch: pytest.MonkeyPatch) -> None:
    """lm-eval reads letter log-likelihoods (the argmax, what temperature 0 gives): a temperature or a generator
    role aimed at MedGuard would be silently ignored, so it is an error that says why."""
    from medfuzz.tasks.lm_eval import _options

    with pytest.raises(ConfigError, match=r"medguard_temperature: .*log-likelihoods"):
        hooks.aspect_docs("defense", medguard_temperature=0.7)
    with pytest.raises(ConfigError, match=r"medguard_generator: .*only in Inspect"):
        hooks.aspect_docs("colloquial", medguard_generator=True)
    with pytest.raises(ConfigError, match=r"temperature: .*log-likelihoods"):  # plain, from --metadata
        hooks.aspect_docs("defense", temperature=0.7, medguard_limit_per_aspect=1)
    # the same plain name from --model_args is the model's (lm-eval merges both into the hook's kwargs)
    monkeypatch.setattr(_options, "model_arg_names", lambda: frozenset({"temperature"}))
    assert hooks.aspect_docs("defense", temperature=0.7, medguard_limit_per_aspect=1)["test"]


def test_lm_eval_results_carry_the_position_diagnostic() -> None:
    from medfuzz.scorers.medguard import position_report, result_from_doc

    docs = hooks.aspect_docs("defense", medguard_limit_per_aspect=8)["test"]
    results = [result_from_doc(d, [(0.0 if k == "A" else -5.0, False) for k in d["letters"]]) for d in docs]
    (position,) = position_report(results).values()
    assert position.chance == 0.25 and position.answers == {"A": 1.0}
    assert position.keys == {"A": 0.25, "B": 0.25, "C": 0.25, "D": 0.25}  # balanced keys, first 8 items
    assert sum(r.correct for r in results) == 2
