"""The one option reader of the lm-eval hooks: a misspelt name stops every hook with the closest known name;
``--model_args`` names, lm-eval's own metadata and ``ignore_options`` are left alone."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from medfuzz.options import ConfigError
from medfuzz.tasks.lm_eval import hook_options
from medfuzz.tasks.lm_eval.hook_options import families, known_names, read_options


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
    monkeypatch.setattr(hook_options, "model_arg_names", lambda: frozenset({"pretrained"}))
    assert read_options({"pretrained": "x", "data": "demo"}, "clean", task="t") == {"data": "demo"}


def _inside(function: str, module: str, call, **local_values):
    """Run ``call`` inside a function named like lm-eval's (``module.function``) with these locals, as a hook
    runs inside lm-eval's own call."""
    namespace = {"__name__": module, "call": call}
    exec(f"def {function}({', '.join(local_values)}):\n    return call()\n", namespace)
    return namespace[function](**local_values)


def test_a_name_in_both_model_args_and_metadata_on_the_command_line_is_an_option_too() -> None:
    """lm-eval merges ``--model_args`` into the metadata; a name the user also gave in ``--metadata`` (the planted
    model's documented command: ``--model_args data=demo --metadata '{"data": "demo"}'``) reaches the hook."""
    import argparse

    raw = {"data": "demo", "pretrained": "x"}

    def read():
        return _inside("simple_evaluate", "lm_eval.evaluator", lambda: read_options(raw, "clean", task="t"),
                       model_args="data=demo,pretrained=x", metadata=None, limit=None, samples=None)

    assert read() == {}  # only from --model_args: the model's
    for given in ('{"data": "demo"}', {"data": "demo"}):
        args = argparse.Namespace(metadata=given)
        assert _inside("_execute", "lm_eval._cli.run", read, args=args) == {"data": "demo"}


def test_simple_evaluate_metadata_reaches_the_hooks_with_a_task_manager_of_one_s_own() -> None:
    """``simple_evaluate(task_manager=TaskManager(include_path=P), metadata={...})``: lm-eval passes that metadata
    to no task; the hooks read it (the task manager's own metadata wins), and a misspelt name in it still stops."""
    def read(raw):
        return _inside("simple_evaluate", "lm_eval.evaluator", lambda: read_options(raw, "clean", task="t"),
                       model_args="", metadata={"data": "demo", "limit": 3}, limit=None, samples=None)

    assert read({"version": 3.0}) == {"data": "demo", "limit": 3}
    assert read({"limit": 5}) == {"data": "demo", "limit": 5}
    with pytest.raises(ConfigError, match="'limt'"):
        _inside("simple_evaluate", "lm_eval.evaluator", lambda: read_options({}, "clean", task="t"),
                model_args="", metadata={"limt": 3}, limit=None, samples=None)


def test_simple_evaluate_with_a_task_manager_of_one_s_own_runs_the_user_s_data() -> None:
    """The Python form of docs/usage.md, end to end (offline: ``data=hf`` would fail to reach the Hub)."""
    import lm_eval.models  # noqa: F401 - lm-eval's own registry first
    from lm_eval import simple_evaluate
    from lm_eval.api.registry import get_model
    from lm_eval.tasks import TaskManager

    from medfuzz.adapters.lm_eval_registry import register_models
    from medfuzz.tasks import LM_EVAL_TASKS_PATH

    register_models()
    lm = get_model("medfuzz-planted").create_from_arg_string("data=demo")
    results = simple_evaluate(model=lm, tasks=["medqa_clean"], metadata={"data": "demo", "limit": 3},
                              task_manager=TaskManager(include_path=str(LM_EVAL_TASKS_PATH)))
    assert results["n-samples"]["medqa_clean"] == {"original": 3, "effective": 3}
    assert results["configs"]["medqa_clean"]["metadata"].get("data") is None  # lm-eval's record: it passed none


KEY = "sk-canary-options-0123456789"


@pytest.mark.parametrize("family", ["clean", "tces", "medfuzz", "medguard"])
@pytest.mark.parametrize("name", ["api_key", "key", "auth_token", "token", "header", "hf_token", "password",
                                  "medfuzz_api_key", "medqa_auth_token", "OPENAI_API_KEY"])
def test_a_secret_is_refused_from_metadata_and_model_args_alike(monkeypatch: pytest.MonkeyPatch, family: str,
                                                              name: str) -> None:
    """lm-eval writes both into results_*.json; a --model_args name is otherwise left to the model, and
    ignore_options does not let a secret through either. The message names the option, never its value."""
    for model_args in (frozenset(), frozenset({name})):
        monkeypatch.setattr(hook_options, "model_arg_names", lambda names=model_args: names)
        for raw in ({name: KEY}, {name: KEY, "ignore_options": name}):
            with pytest.raises(ConfigError, match=f"{name}: a secret, refused: .*OPENAI_API_KEY") as err:
                read_options(raw, family, task="t", benchmark="medqa")
            assert KEY not in str(err.value)


def test_secret_names_among_lm_eval_s_api_model_arguments() -> None:
    """Of every argument lm-eval's API models take, exactly the two that carry a credential are secrets
    (``auth_token`` goes to the remote tokenizer, ``header`` replaces the Authorization header); the medfuzz
    options are none, ``api_key_env`` (a variable's name) included."""
    import inspect

    from lm_eval.models.api_models import TemplateAPI
    from lm_eval.models.openai_completions import LocalCompletionsAPI

    from medfuzz.models.failures import secret_name

    names = {*inspect.signature(TemplateAPI.__init__).parameters, *inspect.signature(LocalCompletionsAPI).parameters}
    assert {n for n in names if secret_name(n)} == {"auth_token", "header"}
    assert not {n for n in known_names() if secret_name(n)} and "api_key_env" in known_names()


def test_model_args_with_a_secret_are_refused_up_front() -> None:
    with pytest.raises(ConfigError, match=r"^--lm-eval: auth_token: a secret, refused.*; key: a secret") as err:
        hook_options.refuse_secret_model_args(f"model=m,auth_token={KEY},key={KEY},tokenizer_backend=remote",
                                          where="--lm-eval")
    assert KEY not in str(err.value)
    with pytest.raises(ConfigError, match="header: a secret"):
        hook_options.refuse_secret_model_args({"model": "m", "header": {"Authorization": KEY}})
    hook_options.refuse_secret_model_args("model=m,base_url=http://h/v1/completions,add_bos_token=True")  # no secret


def test_command_line_secrets_are_found_for_log_redaction(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MY_SERVICE_CRED", "cred-0123456789")
    argv = ["--model", "local-completions", "--model_args", f"model=m,api_key={KEY},tokenizer_backend=remote",
            "--metadata", '{"data": "demo", "medfuzz_token": "tok-0123456789", "medfuzz_api_key_env": '
            '"MY_SERVICE_CRED", "api_key_env": "UNSET_VARIABLE_NAME"}']
    assert hook_options.command_line_secrets(argv) == [KEY, "tok-0123456789", "cred-0123456789"]
    assert hook_options.command_line_secrets(["--model_args", '{"auth_token": "abc"}', "--tasks", "x"]) == ["abc"]
    assert hook_options.command_line_secrets([f"--model_args=model=m,key={KEY}", "--limit=2"]) == [KEY]


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

    from medfuzz.adapters.lm_eval_registry import register_models
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
