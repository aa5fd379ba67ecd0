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
    assert "unweighted mean of 10 aspects" in group["group_alias"]
    manager = TaskManager(include_path=str(LM_EVAL_TASKS_PATH), include_defaults=False)
    for aspect in ALL_ASPECTS:
        # lm-eval's own loader resolves the include: template and the !function hooks
        config = load_yaml(manager._index[f"medguard_{aspect.value}"].yaml_path)
        assert config["task"] == f"medguard_{aspect.value}"
        assert config["dataset_kwargs"] == {"task_aspect": aspect.value}
        assert config["custom_dataset"] is hooks.aspect_docs
        assert config["process_results"] is hooks.process_results
        assert config["metric_list"] == [{"metric": "safety", "aggregation": "mean", "higher_is_better": True}]


def test_docs_strategies_and_limits() -> None:
    race = hooks.aspect_docs("race_equity", medguard_limit_per_aspect="1", medguard_strategy="safe")["test"]
    assert len(race) == 2  # one case: a race-consistency unit per sex, each holding the four races
    unit = race[0]
    variants = json.loads(unit["variants"])
    assert [v["race"] for v in variants] == ["Asian", "Black", "Hispanic", "White"]
    assert len({v["sex"] for v in variants}) == 1 and unit["id"] == f"{unit['case_id']}|{variants[0]['sex']}"
    assert unit["context"].startswith(SAFE_INSTRUCTIONS) and len(unit["choices"]) == 4 * len(unit["letters"])
    assert all(json.loads(v["option_order"])[v["letters"][v["answer_index"]]] for v in variants)
    gender = hooks.aspect_docs("gender_equity", medguard_limit_per_aspect=1)["test"]
    assert len(gender) == 4 and all(len(json.loads(d["variants"])) == 2 for d in gender)
    basic = hooks.aspect_docs("hallucination", medguard_limit_per_aspect=2)["test"]
    assert len(basic) == 2 and basic[0]["prompt"].startswith("Question: Article 1:")
    assert basic[0]["context"] == basic[0]["prompt"] and basic[0]["choices"] == [" A", " B", " C", " D"]
    with pytest.raises(ValueError, match="chain-of-thought needs generation"):
        hooks.aspect_docs("defense", medguard_strategy="cot")


def test_a_unit_doc_scores_exactly_what_the_variant_prompts_score() -> None:
    """Each choice of an equity unit is one variant's prompt + " " + letter, the text a per-variant doc scores."""
    from medfuzz.solvers.medguard import builders
    from medfuzz.solvers.medguard.builders import limit_per_pool
    from medfuzz.solvers.medguard.config import MedGuardConfig

    config = MedGuardConfig(aspects="gender_equity", limit_per_aspect=1)
    items = limit_per_pool(builders.load(None, "gender_equity", config.build_config()), 1)
    prompts = {(i.metadata["sex"], i.metadata["race"]): hooks.item_to_doc(i, "basic")["prompt"] for i in items}
    for doc in hooks.aspect_docs("gender_equity", limit_per_aspect=1)["test"]:
        race = doc["id"].rsplit("|", 1)[1]
        expected = [f"{prompts[(sex, race)]} {k}" for sex in ("male", "female") for k in doc["letters"]]
        assert [doc["context"] + c for c in doc["choices"]] == expected


def test_process_results_scores_the_argmax_letter() -> None:
    doc = hooks.aspect_docs("defense", medguard_limit_per_aspect=1)["test"][0]
    gold = doc["answer_index"]
    right = [(-1.0 if i == gold else -3.0, False) for i in range(len(doc["letters"]))]
    wrong = [(-3.0 if i == gold else -1.0 - i, False) for i in range(len(doc["letters"]))]
    assert hooks.process_results(doc, right) == {"safety": 1.0}
    assert hooks.process_results(doc, wrong) == {"safety": 0.0}
    for aspect in ("gender_equity", "race_equity"):
        for unit in hooks.aspect_docs(aspect, medguard_limit_per_aspect=1)["test"]:
            variants = json.loads(unit["variants"])
            same_option, always_a = [], []
            for v in variants:  # always the option that was originally A, whatever letter it has now
                order = json.loads(v["option_order"])
                pick = next(k for k, o in order.items() if o == "A")
                same_option += [(0.0 if k == pick else -5.0, False) for k in v["letters"]]
                always_a += [(0.0 if k == "A" else -5.0, False) for k in v["letters"]]
            assert hooks.process_results(unit, same_option) == {"safety": 1.0}
            # shuffled option orders defeat "always A" (unless the shuffles happen to agree on A)
            agree = len({json.loads(v["option_order"])["A"] for v in variants}) == 1
            assert hooks.process_results(unit, always_a) == {"safety": float(agree)}


def test_inspect_only_options_are_refused_with_the_reason(monkeypatch: pytest.MonkeyPatch) -> None:
    """lm-eval reads letter log-likelihoods (the argmax, what temperature 0 gives): a temperature or a generator
    role aimed at MedGuard would be silently ignored, so it is an error that says why."""
    from medfuzz.tasks.lm_eval import hook_options

    with pytest.raises(ConfigError, match=r"medguard_temperature: .*log-likelihoods"):
        hooks.aspect_docs("defense", medguard_temperature=0.7)
    with pytest.raises(ConfigError, match=r"medguard_generator: .*only in Inspect"):
        hooks.aspect_docs("colloquial", medguard_generator=True)
    with pytest.raises(ConfigError, match=r"temperature: .*log-likelihoods"):  # plain, from --metadata
        hooks.aspect_docs("defense", temperature=0.7, medguard_limit_per_aspect=1)
    # the same plain name from --model_args is the model's (lm-eval merges both into the hook's kwargs)
    monkeypatch.setattr(hook_options, "model_arg_names", lambda: frozenset({"temperature"}))
    assert hooks.aspect_docs("defense", temperature=0.7, medguard_limit_per_aspect=1)["test"]


def test_lm_eval_results_carry_the_position_diagnostic() -> None:
    from medfuzz.scorers.medguard import position_report, result_from_doc

    docs = hooks.aspect_docs("defense", medguard_limit_per_aspect=8)["test"]
    results = [result_from_doc(d, [(0.0 if k == "A" else -5.0, False) for k in d["letters"]]) for d in docs]
    (position,) = position_report(results).values()
    assert position.chance == 0.25 and position.answers == {"A": 1.0}
    assert position.keys == {"A": 0.25, "B": 0.25, "C": 0.25, "D": 0.25}  # balanced keys, first 8 items
    assert sum(r.correct for r in results) == 2
