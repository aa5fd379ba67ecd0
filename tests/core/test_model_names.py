"""One name per model across both harnesses: lm-eval results are named by ``medfuzz_model`` (what ``medfuzz run``
passes: its Inspect model), else by the served model in ``--model_args``, never by the backend when a model is
named; the report's first screen has one card per model and ``model-index.yaml`` parses in Hugging Face's own
reader to that one model with the clean baseline and every robustness number."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from medfuzz.report.runs import lm_eval_model_name

INSPECT_MODEL = "medfuzz-scripted/served-model"


@pytest.mark.parametrize(("data", "name"), [
    # lm-eval 0.4.13 stores --model_args as a mapping (the local-completions run: named by its backend)
    ({"config": {"model": "local-completions", "model_args": {"model": "planted", "base_url": "http://h/v1"}},
      "model_name": "planted"}, "planted"),
    ({"config": {"model": "hf", "model_args": "pretrained=org/m,dtype=float16"}}, "org/m"),
    ({"config": {"model": "hf", "model_args": "pretrained=org/base,peft=org/adapter"}}, "org/adapter"),
    # no model in the args: the backend, not lm-eval's model_name (a random id then)
    ({"config": {"model": "medfuzz-local", "model_args": "n_threads=2"}, "model_name": "x1f3"}, "medfuzz-local"),
    ({}, "lm-eval"),
    # the name medfuzz run passes wins over the served model (one --metadata, in every task's config)
    ({"config": {"model": "local-completions", "model_args": {"model": "planted"}},
      "configs": {"medqa_clean": {"metadata": {"data": "demo", "medfuzz_model": "openai-api/planted/planted"}}}},
     "openai-api/planted/planted"),
])
def test_an_lm_eval_result_is_named_by_its_model(data: dict[str, Any], name: str) -> None:
    assert lm_eval_model_name(data) == name


def test_the_model_name_in_metadata_is_accepted_by_every_hook_and_read_by_none() -> None:
    from medfuzz.records.keys import MODEL_LABEL
    from medfuzz.tasks.lm_eval.hook_options import read_options

    raw = {"data": "demo", MODEL_LABEL: "openai-api/planted/planted", "version": 2.0}
    for family in ("clean", "tces", "medfuzz", "medguard"):
        assert MODEL_LABEL not in read_options(raw, family, task=f"{family}_task")


@pytest.fixture(scope="module")
def baseline_log(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A clean baseline of 4 items through Inspect's own loop with a scripted model: 3 strict answers right
    (C is the demo items' key only where the script says so: the counts are read back, not assumed)."""
    from inspect_ai import eval as inspect_eval

    from medfuzz.tasks.inspect.baselines import medqa_clean
    from tests.scripted_inspect import SCRIPT

    folder = tmp_path_factory.mktemp("names")
    SCRIPT[:] = ["ANSWER: C", "ANSWER: A", "ANSWER: B", "ANSWER: D"]
    [log] = inspect_eval(medqa_clean(data="demo", limit=4), model=INSPECT_MODEL, log_dir=str(folder / "inspect"),
                         display="none")
    return Path(log.location)


def _lm_eval_results(folder: Path, label: str | None, model_args: dict[str, Any]) -> Path:
    """A results file in lm-eval 0.4.13's layout: the baseline and one task of each robustness method."""
    metadata = {"data": "demo", **({"medfuzz_model": label} if label else {})}
    path = folder / "lm-eval" / f"results_{len(list(folder.rglob('results_*')))}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({
        "results": {"medqa_clean": {"acc,none": 0.25, "acc_stderr,none": 0.25},
                    "tces_medqa_drugs": {"clean_acc,none": 0.5, "attacked_acc,none": 0.25, "flip_rate,none": 0.5,
                                         "flip_rate_stderr,none": 0.25},
                    "medfuzz_medqa": {"clean_acc,none": 1.0, "attacked_acc,none": 0.5, "flip_rate,none": 0.5},
                    "medguard": {"safety,none": 0.3, "safety_stderr,none": 0.1}},
        "configs": {t: {"metadata": metadata} for t in ("medqa_clean", "tces_medqa_drugs", "medfuzz_medqa")},
        "config": {"model": "local-completions", "model_args": model_args},
        "n-samples": {"medqa_clean": {"original": 4, "effective": 4}},
    }))
    return path


def _numbers(card: Any) -> set[tuple[str, str, float]]:
    return {(f"{r.title} ({r.harness})", n.metric, round(n.value, 4)) for r in card.results for n in r.numbers
            if n.text is None and n.value == n.value}


def test_both_harnesses_on_one_card_and_a_model_index_the_hub_reads_as_one_model(baseline_log: Path,
                                                                                  tmp_path: Path) -> None:
    from huggingface_hub import ModelCard
    from huggingface_hub.repocard_data import model_index_to_eval_results

    from medfuzz.report import overview
    from medfuzz.report.runs import read_inspect_log

    results = _lm_eval_results(tmp_path, INSPECT_MODEL, {"model": "served-model", "base_url": "http://h/v1"})
    [card] = overview.build([baseline_log, results])
    assert card.model == INSPECT_MODEL
    assert {r.harness for r in card.of("baseline")} == {"Inspect", "lm-eval"}
    strict = read_inspect_log(baseline_log)
    [inspect_baseline] = [r for r in card.of("baseline") if r.harness == "Inspect"]
    accuracy = inspect_baseline.numbers[0]
    assert (accuracy.metric, accuracy.k, accuracy.n) == ("baseline_acc", sum(strict.per_item.values()), 4)

    written = overview.write_files([card], tmp_path)
    assert [p.name for p in written] == ["summary.json", "model-index.yaml"]
    hub = ModelCard("---\n" + (tmp_path / "model-index.yaml").read_text(encoding="utf-8") + "---\n# card\n")
    assert hub.data.model_name == INSPECT_MODEL
    name, parsed = model_index_to_eval_results(hub.data.to_dict()["model-index"])
    assert name == INSPECT_MODEL
    # every number of the card, the clean baselines among them, once; the data as it was: the bundled demo rows
    # (dev split, 4 items; lm-eval: its docs) and MedGuard's bundled build, neither under a Hub dataset's id
    assert {(r.metric_name.split(": ")[0], r.metric_type, r.metric_value) for r in parsed} == _numbers(card)
    assert len({r.metric_name for r in parsed}) == len(parsed)  # each number once, by its run and harness
    assert ("baseline_acc", accuracy.value) in {(r.metric_type, round(r.metric_value, 4)) for r in parsed}
    assert {r.dataset_type for r in parsed} == {"medfuzz:medqa-demo", "medfuzz:medguard-bundled"}
    assert {(r.dataset_split, str(r.dataset_args)) for r in parsed if r.metric_type == "baseline_acc"} == {
        ("dev", "{'items': 4}")}
    assert {str(r.dataset_args) for r in parsed if r.metric_type == "acc"} == {"{'docs': 4}"}
    # the Hub files results under (task type, dataset): each number stays under its own harness's heading
    for r in parsed:  # the metric's name says its run and harness; its task, the same harness
        harness = r.metric_name.split(": ")[0].rsplit(" (", 1)[1]
        assert r.task_name.endswith(f"({harness}") and harness in ("Inspect)", "lm-eval)"), r.metric_name
    assert all(r.dataset_name and not r.dataset_name.startswith(("tces_", "medfuzz_")) for r in parsed)


def test_a_served_model_name_joins_its_inspect_model_and_nothing_is_merged_on_a_guess(baseline_log: Path,
                                                                                     tmp_path: Path) -> None:
    """lm-eval run by hand (no medfuzz_model): ``served-model`` is the model of ``medfuzz-scripted/served-model``;
    ``other`` is no Inspect model's, so it keeps its own card (and the Hub files one per model)."""
    from medfuzz.report import overview

    served = _lm_eval_results(tmp_path, None, {"model": "served-model"})
    [card] = overview.build([baseline_log, served])
    assert card.model == INSPECT_MODEL and {r.harness for r in card.results} == {"Inspect", "lm-eval"}

    other = _lm_eval_results(tmp_path, None, {"model": "other"})
    cards = overview.build([baseline_log, other])
    assert [c.model for c in cards] == [INSPECT_MODEL, "other"]
    names = [p.name for p in overview.write_files(cards, tmp_path)]
    # one model per file (a block of two reads in Hugging Face's parser as one model), none with both
    assert names == ["summary.json", f"model-index.{INSPECT_MODEL.replace('/', '_')}.yaml", "model-index.other.yaml"]


def test_medfuzz_run_passes_its_model_to_the_lm_eval_half(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The lm-eval command ``medfuzz run`` starts carries the Inspect model as ``medfuzz_model`` in --metadata."""
    import subprocess

    from medfuzz.cli.suite.lm_eval_half import LmEvalPlan, run_lm_eval
    from medfuzz.cli.suite.plan import SuitePlan

    commands: list[list[str]] = []

    class FakeLmEval:  # the lm-eval subprocess, as run_lm_eval starts it (its own session), finishing at once
        def __init__(self, command: list[str], **_: Any) -> None:
            commands.append(command)
            self.pid = 0

        def wait(self, timeout: float | None = None) -> int:
            return 0

    monkeypatch.setattr(subprocess, "Popen", FakeLmEval)
    plan = SuitePlan(model="openai-api/vllm/org/m", out=tmp_path, data="demo", methods=("baseline",))
    run_lm_eval(plan, LmEvalPlan("local-completions", "model=org/m"), None, tmp_path / "lm-eval.out",
                model_label="openai-api/vllm/org/m")
    [command] = commands
    metadata = json.loads(command[command.index("--metadata") + 1])
    assert metadata["medfuzz_model"] == "openai-api/vllm/org/m"


def test_a_cards_results_have_one_order_whatever_the_log_order() -> None:
    """Log file names start with their run's start time, which differs between a whole run and its shards: the
    card (and summary.json, model-index.yaml) must not follow it."""
    from medfuzz.report.overview import MethodResult, result_order

    def result(method: str, harness: str, title: str) -> MethodResult:
        return MethodResult(method=method, harness=harness, title=title, task=title, dataset="medqa", numbers=[],
                            sources=[])

    wanted = [result("baseline", "Inspect", "a"), result("medfuzz", "Inspect", "m"), result("medfuzz", "lm-eval", "m"),
              result("tces", "Inspect", "t1"), result("tces", "Inspect", "t2"), result("medguard", "lm-eval", "g")]
    for shuffled in (wanted[::-1], wanted[2:] + wanted[:2], wanted[1::2] + wanted[::2]):
        assert sorted(shuffled, key=result_order) == wanted
