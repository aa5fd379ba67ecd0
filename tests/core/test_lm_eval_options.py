"""The one option reader of the lm-eval hooks: a misspelt name stops every hook with the closest known name;
``--model_args`` names, lm-eval's own metadata and ``ignore_options`` are left alone."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from medfuzz.options import ConfigError
from medfuzz.tasks.lm_eval import _options
from medfuzz.tasks.lm_eval._options import families, known_names, read_options


def test_known_names_are_real_parameters_only() -> None:
    for family, (known, refused) in families().items():
        assert not {"DOCS", "LABEL"} & (set(known) | set(refused)), family
        assert not set(known) & set(refused), family
    assert {"turns", "sampler", "limit_per_aspect", "call_timeout", "call_retries"} <= known_names()
    assert "budget" not in known_names() and "temperature" not in known_names()  # refused, with a reason


@pytest.mark.parametrize(("family", "raw", "suggestion"), [
    ("clean", {"data": "demo", "limt": 2}, "'limit'"),
    ("tces", {"samplr": "pdws"}, "'sampler'"),
    ("tces", {"tces_seeed": 1}, "'seed'"),
    ("medfuzz", {"trns": 3}, "'turns'"),
    ("medfuzz", {"medfuzz_replicate": 2}, "'replicates'"),
    ("medfuzz", {"call_timout": 5}, "'call_timeout'"),
    ("medguard", {"limit_per_aspct": 2}, "'limit_per_aspect'"),
    ("medguard", {"medqa_dat": "demo"}, "'data'"),
])
def test_a_misspelt_name_stops_the_run_with_the_closest_name(family, raw, suggestion) -> None:
    with pytest.raises(ConfigError, match="unknown option") as err:
        read_options(raw, family, task="some_task", benchmark="medqa")
    message = str(err.value)
    assert f"did you mean {suggestion}" in message and message.startswith("some_task: ")
    assert "DOCS" not in message and "LABEL" not in message


def test_every_unknown_name_in_one_error_and_refusals_with_their_reason() -> None:
    with pytest.raises(ConfigError) as err:
        read_options({"trns": 3, "samplr": "pdws", "tces_budget": 8}, "tces", task="tces_medqa_drugs")
    message = str(err.value)
    assert "'trns' (did you mean 'turns'?)" in message and "'samplr' (did you mean 'sampler'?)" in message
    assert "tces_budget: lm-eval's TCES tasks are the single-query transform (B = 1)" in message


def test_prefixes_fold_and_other_families_names_pass() -> None:
    raw = {"data": "hf", "medqa_data": "demo", "tces_seed": 3, "seed": 1, "turns": 2, "medguard_n": 5,
           "medmcqa_split": "dev", "version": 2.0, "config_source": "x.yaml"}
    assert read_options(raw, "tces", task="t", benchmark="medqa") == {"data": "demo", "seed": 3}
    assert read_options(raw, "medfuzz", task="t", benchmark="medqa") == {"data": "demo", "seed": 1, "turns": 2}
    assert read_options(raw, "clean", task="t", benchmark="medmcqa") == {"data": "hf", "seed": 1, "split": "dev"}


def test_model_args_and_ignored_names_are_left_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(ConfigError, match="'pretrained'"):
        read_options({"pretrained": "x"}, "clean", task="t")
    assert read_options({"max_seq_lengths": [4096], "ignore_options": "max_seq_lengths"}, "clean", task="t") == {}
    monkeypatch.setattr(_options, "model_arg_names", lambda: frozenset({"pretrained"}))
    assert read_options({"pretrained": "x", "data": "demo"}, "clean", task="t") == {"data": "demo"}


def test_every_hook_reads_through_it(tmp_path: Path) -> None:
    from medfuzz.tasks.lm_eval.baselines import clean_docs
    from medfuzz.tasks.lm_eval.medfuzz import medfuzz_docs
    from medfuzz.tasks.lm_eval.medguard import aspect_docs
    from medfuzz.tasks.lm_eval.tces import tces_docs

    calls = [lambda: clean_docs("medqa", data="demo", limt=1),
             lambda: medfuzz_docs("medqa", fuzzed=str(tmp_path / "none.jsonl"), trns=3),
             lambda: aspect_docs("defense", limit_per_aspct=1),
             lambda: tces_docs("medqa", "drugs", data="demo", samplr="pdws")]
    for call, name in zip(calls, ("limit", "turns", "limit_per_aspect", "sampler"), strict=True):
        with pytest.raises(ConfigError, match=f"did you mean '{name}'"):
            call()


def test_model_args_are_found_in_lm_eval_s_own_call() -> None:
    """Through ``lm_eval.simple_evaluate`` as the CLI calls it (metadata = model_args | metadata): a model
    argument no medfuzz hook knows is tolerated, a misspelt --metadata name is not."""
    import lm_eval
    from lm_eval.tasks import TaskManager

    from medfuzz.cli.lm_eval import register_models
    from medfuzz.tasks import LM_EVAL_TASKS_PATH

    register_models()
    model_args = "spec=default,dtype=float32"

    def run(metadata: dict) -> dict:
        merged = {"spec": "default", "dtype": "float32"} | metadata
        manager = TaskManager(include_path=str(LM_EVAL_TASKS_PATH), include_defaults=False, metadata=merged)
        return lm_eval.simple_evaluate(model="medfuzz-planted", model_args=model_args, tasks=["medqa_clean"],
                                       task_manager=manager, limit=2, bootstrap_iters=0)

    assert run({"data": "demo"})["results"]["medqa_clean"]["acc,none"] in (0.0, 0.5, 1.0)
    with pytest.raises(ConfigError, match=r"medqa_clean: unknown option 'shuffle_choice' .*'shuffle_choices'"):
        run({"data": "demo", "shuffle_choice": "true"})


pytestmark = pytest.mark.skipif(importlib.util.find_spec("lm_eval") is None, reason="needs lm-eval")
