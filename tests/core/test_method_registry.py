"""The method registry (``medfuzz.records.methods``): a fourth method registered with one spec, and nothing else
edited, is in ``medfuzz run``'s plan (its runs, options, bound and lm-eval half), in the option checks of both
harnesses, in the run itself (on the planted server), in the terminal summary and in the report (its section
and run card, its numbers on the first screen, in ``summary.json`` and ``model-index.yaml``)."""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from inspect_ai import Task, task
from inspect_ai.dataset import Sample
from inspect_ai.scorer import Metric, SampleScore, Score, Target, metric, scorer
from inspect_ai.solver import TaskState, generate

from medfuzz.options import ConfigError
from medfuzz.planted.server import PlantedServer
from medfuzz.records.keys import METHOD_KEY
from medfuzz.records.methods import DATA_OPTIONS, METHODS, Method, registered

PROBE_TASK = "registry_probe"  # the Inspect registry name of the probe's task (a module outside a package)


@dataclass(frozen=True)
class ProbeConfig:
    """The probe's one parameter: how many of its replies' characters the scorer reads."""

    window: int = 200


@metric
def probe_acc() -> Metric:
    def compute(scores: list[SampleScore]) -> float:
        return sum(s.score.as_float() for s in scores) / len(scores)

    return compute


@scorer(metrics=[probe_acc()])
def probe_scorer(window: int) -> object:
    async def score(state: TaskState, target: Target) -> Score:
        return Score(value=float(target.text in state.output.completion[:window]))

    return score


@task(name=PROBE_TASK)
def registry_probe(data: str = "demo", split: str | None = None, limit: int | None = None,
                   shuffle_choices: bool = False, seed: int = 0, window: int = 200) -> Task:
    """A planted method: each MedQA item asked once, scored by whether the key's letter is in the reply."""
    from medfuzz.benchmarks.selection import DataSelection

    items = DataSelection(data, split, limit, shuffle_choices).items("medqa", seed)
    samples = [Sample(input=f"{item.question}\n" + "\n".join(f"{k}. {v}" for k, v in item.options.items()),
                      target=item.answer, id=item.id) for item in items]
    return Task(dataset=samples, solver=generate(), scorer=probe_scorer(window), metadata={METHOD_KEY: "probe"})


PROBE = Method(
    key="probe", title="Probe", section="Probe runs", blurb="A method registered by a test.",
    inspect_task=PROBE_TASK, run_rank=1.5, config=lambda: ProbeConfig, data_options=DATA_OPTIONS,
    lm_eval_family="probe", lm_eval_options=lambda: ("data", "window"), lm_eval_refused={"shots": "no shots here"},
    lm_eval_tasks=("probe_medqa",), lm_eval_prefix="probe_", lm_eval_metrics=("acc",),
    headline=("probe_acc",), model_index_task="Probe robustness", labels={"probe_acc": "probe accuracy"})


@pytest.fixture
def probe() -> Iterator[Method]:
    before = dict(METHODS)
    with registered(PROBE) as method:
        yield method
    assert before == METHODS  # the registry is as it was


def test_the_data_options_are_the_data_selection_and_its_seed() -> None:
    from medfuzz.benchmarks.selection import DataSelection

    assert (*DataSelection.names(), "seed") == DATA_OPTIONS


def test_the_plan_runs_bounds_and_hands_lm_eval_the_new_method(probe: Method, tmp_path: Path) -> None:
    from medfuzz.cli.suite.build import bound, build_tasks
    from medfuzz.cli.suite.lm_eval_half import lm_eval_tasks
    from medfuzz.cli.suite.plan import SuitePlan

    plan = SuitePlan(model="openai/gpt-4o", out=tmp_path, methods=("medguard", "probe", "baseline"), level="quick",
                     limit=3, options={"probe_window": 40, "seed": 2})
    runs = plan.runs()
    assert [(r.label, r.method, r.task) for r in runs] == [
        ("clean baseline", "baseline", "medfuzz/medqa_clean"), ("probe", "probe", PROBE_TASK),
        ("medguard", "medguard", "medfuzz/medguard")]  # cheapest first: the probe's rank sits between
    assert runs[1].args == {"data": "demo", "limit": 3, "window": 40, "seed": 2}
    assert plan.settings()["limits"] == {"medguard": 3, "probe": 3, "baseline": 3}
    built = build_tasks(SuitePlan(model="openai/gpt-4o", out=tmp_path, methods=("probe",), level="quick", limit=3))
    assert bound(built).per_run == {"probe": {"target": 3}}  # no config bound: one call per sample
    tasks, metadata = lm_eval_tasks(plan, None)
    assert tasks == ["medqa_clean", "probe_medqa", "medguard"]
    assert metadata == {"data": "demo", "clean_limit": 3, "probe_limit": 3, "medguard_limit_per_aspect": 3}


def test_both_harnesses_check_the_new_methods_options(probe: Method, tmp_path: Path) -> None:
    from medfuzz.cli.suite.plan import SuitePlan
    from medfuzz.tasks.lm_eval.hook_options import read_options

    with pytest.raises(ConfigError, match=r"did you mean 'probe_window'"):
        SuitePlan(model="openai/gpt-4o", out=tmp_path, methods=("probe",), options={"probe_windw": 1}).check_options()
    with pytest.raises(ConfigError, match=r"--methods: 'probes' is not a method \(did you mean 'probe'\?\)"):
        SuitePlan(model="openai/gpt-4o", out=tmp_path, methods=("probes",))
    assert read_options({"probe_window": 9, "data": "demo"}, "probe", task="probe_medqa") == {"window": 9,
                                                                                             "data": "demo"}
    with pytest.raises(ConfigError, match=r"probe_medqa: shots: no shots here"):
        read_options({"shots": 1}, "probe", task="probe_medqa")
    with pytest.raises(ConfigError, match=r"unknown option 'windw' .*did you mean 'window'"):
        read_options({"windw": 1}, "probe", task="probe_medqa")
    # the other methods' hooks know the probe's name too (one --metadata reaches every task of an lm-eval run)
    assert read_options({"probe_window": 9}, "clean", task="medqa_clean") == {}


def test_medfuzz_run_runs_summarises_and_reports_the_new_method(probe: Method, tmp_path: Path,
                                                                 planted: PlantedServer,
                                                                 monkeypatch: pytest.MonkeyPatch,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    from medfuzz.cli.run import execute
    from medfuzz.cli.suite.plan import SuitePlan

    for name, value in planted.inspect_env().items():
        monkeypatch.setenv(name, value)
    out = tmp_path / "run"
    plan = SuitePlan(model=planted.inspect_model(), out=out, methods=("probe",), level="quick", limit=3)
    done = execute(plan, preflight=False)
    printed = capsys.readouterr().out
    assert (done.code, done.error) == (0, None)
    summary = json.loads((out / "report" / "summary.json").read_text())
    (result,) = summary["models"][planted.inspect_model()]["results"]
    assert (result["method"], result["title"], result["numbers"]["probe_acc"]["label"]) == (
        "probe", f"Probe · {PROBE_TASK}", "probe accuracy")
    value = result["numbers"]["probe_acc"]["value"]
    assert 0 <= value <= 1
    assert "Probe" not in summary["models"][planted.inspect_model()]["missing"]
    # the summary: the first screen's result, as the page shows it
    assert re.search(rf"\nProbe\n  Inspect  Probe · {re.escape(PROBE_TASK)}  \(.*\)\n    probe accuracy  {value:.3f}\n",
                     printed), printed
    page = (out / "report" / "index.html").read_text()
    assert "<h2>Probe runs</h2>" in page and f"<h3>{PROBE_TASK} · {planted.inspect_model()}" in page
    assert "Probe robustness (Inspect)" in (out / "report" / "model-index.yaml").read_text()


def probe_glance(log: object, path: Path) -> object:
    """The probe's own first-screen reader (``Method.glance``): its accuracy as a share of the samples."""
    from medfuzz.report.overview import MethodResult, share

    scores = [s.scores["probe_scorer"].value for s in log.samples]  # type: ignore[attr-defined]
    return MethodResult("probe", "Inspect", "Probe · own reader", PROBE_TASK, "demo",
                        [share("probe_acc", int(sum(scores)), len(scores), headline=True)], [str(path)])


def probe_title(done: object) -> str:
    return f"Probe block over {len(done.logs)} run(s)"  # type: ignore[attr-defined]


def probe_words(done: object, harness: str) -> list[str]:
    return [f"  probe words after {harness}"]


def test_a_new_methods_own_reader_and_terminal_block_are_named_by_its_spec(
        probe: Method, tmp_path: Path, planted: PlantedServer, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """A method's first-screen reader and terminal block are code of the shells, named in its spec by import
    name (``glance``, ``terminal_title``, ``terminal_words``): the report and the summary call them, with no
    table of their own to edit."""
    from dataclasses import replace

    from medfuzz.cli.run import execute
    from medfuzz.cli.suite.plan import SuitePlan

    for name, value in planted.inspect_env().items():
        monkeypatch.setenv(name, value)
    named = replace(probe, glance=f"{__name__}:probe_glance", terminal_title=f"{__name__}:probe_title",
                    terminal_words=f"{__name__}:probe_words")
    with registered(named):
        plan = SuitePlan(model=planted.inspect_model(), out=tmp_path / "run", methods=("probe",), level="quick",
                         limit=4)
        done = execute(plan, preflight=False)
    printed = capsys.readouterr().out
    assert (done.code, done.error) == (0, None)
    summary = json.loads((tmp_path / "run" / "report" / "summary.json").read_text())
    (result,) = summary["models"][planted.inspect_model()]["results"]
    assert result["title"] == "Probe · own reader" and result["numbers"]["probe_acc"]["n"] == 4
    assert "\nProbe block over 1 run(s)\n  Inspect  Probe · own reader" in printed, printed
    assert "  probe words after Inspect\n  probe words after lm-eval\n" in printed, printed


# each name a spec gives for a shell: the package it must live in (above the registry: only a shell imports it)
# and what it is called with
SHELL_NAMES = {"task_module": ("medfuzz.tasks.inspect.", None), "renderer": ("medfuzz.report.", None),
               "glance": ("medfuzz.report.", 2), "glance_runs": ("medfuzz.report.", 1),
               "terminal_title": ("medfuzz.cli.", 1), "terminal_words": ("medfuzz.cli.", 2),
               "cost_estimate": ("medfuzz.cli.suite.", 5), "before_first_call": ("medfuzz.tasks.inspect.", 2)}


def test_every_shell_name_of_a_builtin_spec_resolves_to_what_its_shell_calls() -> None:
    import inspect
    import pkgutil
    import types

    from medfuzz.records.methods import SHELL_CODE, Method

    names = {f.name for f in dataclasses.fields(Method) if f.type == "str | None"}
    assert set(SHELL_NAMES) == set(SHELL_CODE) and names - set(SHELL_CODE) == {"lm_eval_family", "lm_eval_prefix"}
    seen = 0
    for spec in METHODS.values():
        assert not (spec.glance and spec.glance_runs), spec.key  # one reader or the other
        for field_name, (package, arity) in SHELL_NAMES.items():
            name = getattr(spec, field_name)
            if name is None:
                continue
            assert name.startswith(package), (spec.key, field_name, name)
            found = pkgutil.resolve_name(name)
            if arity is None:
                assert isinstance(found, types.ModuleType)
                assert field_name != "renderer" or callable(found.render)
            else:
                assert len(inspect.signature(found).parameters) == arity, (spec.key, field_name)
            seen += 1
    assert seen == 19  # 4 task modules, 3 renderers, 3 + 1 readers, 3 + 2 terminal, 2 cost, 1 before the first call


def test_the_builtin_tasks_are_built_without_inspects_registry_lookup(tmp_path, monkeypatch):
    """medfuzz's own tasks are called from ``medfuzz._registry``: with the source folder on PYTHONPATH beside an
    editable install, Inspect cannot tell which distribution ships them, registers them unprefixed, and a
    lookup of ``medfuzz/medqa_clean`` failed (``medfuzz run`` stopped before its first call)."""
    import inspect_ai.util

    from medfuzz.cli.suite.build import build_tasks
    from medfuzz.cli.suite.plan import SuitePlan

    def no_lookup(*args, **kwargs):
        raise LookupError("not in Inspect's registry")

    monkeypatch.setattr(inspect_ai.util, "registry_create", no_lookup)
    built = build_tasks(SuitePlan(model="openai/gpt-4o", out=tmp_path, level="demo", data="demo"))
    assert {run.task for run, _ in built} == {"medfuzz/medqa_clean", "medfuzz/tces_medqa", "medfuzz/medguard",
                                              "medfuzz/medfuzz_medqa"}
    assert all(len(task.dataset) for _, task in built)


@dataclass(frozen=True)
class BoundedConfig:
    """A new method whose config bounds its calls: ``calls`` per sample, and an extra run-start record."""

    calls: int = 3

    @classmethod
    def from_options(cls, **raw: object) -> BoundedConfig:
        return cls(**raw)  # type: ignore[arg-type]

    def max_calls(self, samples: int) -> dict[str, int]:
        return {"target": self.calls * samples}


BOUNDED = Method(key="bounded", title="Bounded", section="Bounded runs", blurb="A bounded method of a test.",
                 inspect_task="bounded_probe", run_rank=1.6, config=lambda: BoundedConfig, config_bounds_calls=True,
                 start_records=lambda config, samples: {"per_sample": config.calls, "samples": samples})


def test_a_new_methods_merged_shards_record_the_whole_runs_bound() -> None:
    """The shard merge recomputes the call bound (and the spec's own run-start records) of any method whose
    config bounds its calls, from the config every method records in one shape (``CONFIG_KEY``): a merged
    run never keeps one shard's bound."""
    from types import SimpleNamespace

    from medfuzz.records.keys import CONFIG_KEY
    from medfuzz.report.shards import _run_start_records

    shard = SimpleNamespace(eval=SimpleNamespace(metadata={METHOD_KEY: "bounded", CONFIG_KEY: {"calls": 5},
                                                           "max_calls": {"target": 5 * 4}}))
    with registered(BOUNDED):
        assert _run_start_records(shard, 12) == {"per_sample": 5, "samples": 12, "max_calls": {"target": 60}}
    assert _run_start_records(shard, 12) == {}  # an unregistered method's records are left as they are


def test_a_level_gives_the_new_method_settings_and_a_spec_its_runs(probe: Method, tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """Level settings are keyed by the method's registry key (``Level.methods``): a level can name the new method
    with no field added anywhere; a level that does not name it runs it as its spec's ``level_runs`` say."""
    from dataclasses import replace

    from medfuzz.cli.suite import levels
    from medfuzz.cli.suite.plan import SuitePlan

    probing = replace(levels.LEVELS["quick"], name="probing",
                      methods={**levels.LEVELS["quick"].methods, "probe": ({"window": 20}, {"window": 80})})
    monkeypatch.setitem(levels.LEVELS, "probing", probing)
    runs = SuitePlan(model="openai/gpt-4o", out=tmp_path, methods=("probe",), level="probing", limit=2).runs()
    assert [r.args["window"] for r in runs] == [20, 80] and len({r.label for r in runs}) == 2
    with registered(replace(PROBE, key="probe2", level_runs=({"window": 5},))):
        [run] = SuitePlan(model="openai/gpt-4o", out=tmp_path, methods=("probe2",), level="quick", limit=2).runs()
        assert run.args["window"] == 5
