"""The benchmark registry is the one place a benchmark is declared (``medfuzz.benchmarks.registry``): a benchmark
registered here, and nowhere else, is found by both harnesses and by ``medfuzz run``; the lm-eval task files on
disk are the ones the registry generates; docs/contributing.md's "Add a benchmark" checklist names exactly the
files a new benchmark touches, and docs/foundation.md's benchmark table is generated from the registry.

After changing a benchmark's declaration, regenerate the task files and the table with

    .venv/bin/python -m medfuzz.tasks.lm_eval.task_yaml
    MEDFUZZ_REGENERATE_DOCS=1 .venv/bin/python -m pytest tests/core/test_benchmark_registry.py
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from medfuzz.benchmarks import registry
from medfuzz.benchmarks.registry import Benchmark, registered
from medfuzz.options import ConfigError
from medfuzz.tasks import LM_EVAL_TASKS_PATH
from medfuzz.tasks.lm_eval import task_yaml

ROOT = Path(__file__).parents[2]
FIXTURES = ROOT / "tests" / "fixtures"
# a benchmark declared only here: its demo items are the MMLU-style fixture
FAKE = Benchmark(key="fakebench", title="Fake bench (tests)", layout="mmlu", licence="CC0-1.0",
                 default_split="test", fewshot_split="train", demo=FIXTURES / "own_mmlu.csv",
                 answers="A to D, a letter", url="https://example.org/fakebench")


def test_the_lm_eval_task_files_on_disk_are_the_ones_the_registry_generates() -> None:
    assert task_yaml.on_disk() == task_yaml.generated(), "run python -m medfuzz.tasks.lm_eval.task_yaml"
    assert task_yaml.main(["--check"]) == 0
    # every task file of a benchmark's tasks is generated (only the templates and MedGuard's are written by hand)
    hand = {p.relative_to(LM_EVAL_TASKS_PATH).as_posix() for p in LM_EVAL_TASKS_PATH.rglob("*.yaml")} - \
        set(task_yaml.on_disk())
    assert all(path.startswith("medguard/") for path in hand), hand


def test_a_registered_benchmark_is_found_in_both_harnesses_and_the_suite(tmp_path: Path) -> None:
    from inspect_ai import eval as inspect_eval
    from inspect_ai._util.registry import registry_lookup

    from medfuzz.cli.suite.build import build_tasks
    from medfuzz.cli.suite.lm_eval_half import lm_eval_tasks
    from medfuzz.cli.suite.plan import SuitePlan
    from medfuzz.records.methods import METHODS
    from medfuzz.tasks.inspect import baselines, medfuzz, tces
    from medfuzz.tasks.lm_eval.baselines import clean_docs
    from medfuzz.tasks.lm_eval.hook_options import read_options
    from tests.scripted_inspect import SCRIPT

    with registered(FAKE):
        # Inspect: one task per method, in the task modules (where `medfuzz run` builds them) and Inspect's registry
        for module, name in ((baselines, "fakebench_clean"), (tces, "tces_fakebench"), (medfuzz, "medfuzz_fakebench")):
            assert callable(getattr(module, name)) and name in module.__all__
            assert any(registry_lookup("task", n) is not None for n in (f"medfuzz/{name}", name)), name
        SCRIPT[:] = ["ANSWER: B", "ANSWER: A", "ANSWER: A"]
        [log] = inspect_eval(baselines.fakebench_clean(data="demo", limit=3), model="medfuzz-scripted/x",
                             log_dir=str(tmp_path / "logs"), display="none")
        assert log.status == "success" and log.eval.task_args["split"] == "test"
        source = log.eval.metadata["data_source"]
        assert (source["benchmark"], source["display"], source["licence"], source["kind"]) == (
            "fakebench", "Fake bench (tests)", "CC0-1.0", "demo")
        assert [s.id for s in log.samples] == ["fakebench-dev-00001", "fakebench-dev-00002", "fakebench-dev-00003"]

        # lm-eval: its task files, written with the templates, are found by lm-eval's own TaskManager
        from lm_eval.tasks import TaskManager, get_task_dict

        folder = tmp_path / "lm_eval"
        task_yaml.write(folder)
        manager = TaskManager(include_path=str(folder), include_defaults=False,
                              metadata={"fakebench_data": "demo", "clean_limit": 4})
        assert {"fakebench_clean", "fakebench_clean_generate", "tces_fakebench_drugs", "tces_fakebench_diseases",
                "medfuzz_fakebench"} <= set(manager.all_tasks)
        task = get_task_dict(["fakebench_clean"], manager)["fakebench_clean"]
        assert [d["id"] for d in task.test_docs()] == [f"fakebench-dev-0000{i}" for i in range(1, 5)]
        # its option prefix, as every benchmark's (fakebench_data aims the data at it alone)
        assert read_options({"fakebench_data": "demo", "medqa_data": "hf"}, "clean", task="fakebench_clean",
                            benchmark="fakebench")["data"] == "demo"
        assert len(clean_docs("fakebench", data="demo", limit=2)["test"]) == 2
        assert METHODS["baseline"].owns_lm_eval_task("fakebench_clean")
        assert METHODS["tces"].owns_lm_eval_task("tces_fakebench_drugs")

        # medfuzz run: --benchmark fakebench runs its tasks in both halves
        plan = SuitePlan(model="medfuzz-scripted/x", out=tmp_path / "suite", benchmark="fakebench", data="demo",
                         methods=("baseline", "tces", "medfuzz"), level="quick")
        assert [run.task for run in plan.runs()] == ["medfuzz/fakebench_clean", "medfuzz/tces_fakebench",
                                                     "medfuzz/medfuzz_fakebench"]
        baseline_plan = SuitePlan(model="medfuzz-scripted/x", out=tmp_path / "suite", benchmark="fakebench",
                                  data="demo", methods=("baseline",), limit=2)
        [(_, built)] = build_tasks(baseline_plan)
        assert built.metadata["benchmark"] == "fakebench" and len(built.dataset) == 2
        tasks, _ = lm_eval_tasks(plan, tmp_path / "fuzzed.eval")
        assert tasks == ["fakebench_clean", "tces_fakebench_drugs", "medfuzz_fakebench"]
    assert "fakebench" not in registry.BENCHMARKS
    assert not set(task_yaml.on_disk()) - set(task_yaml.generated())  # the package's own files were not touched


def test_a_key_must_fit_the_task_names_and_option_prefixes() -> None:
    for key, words in [("Med-QA", "lower-case letters"), ("tces", "reserved"), ("clean", "reserved"),
                       ("2exam", "starting with a letter")]:
        with pytest.raises(ConfigError, match=words):
            Benchmark(key=key, title="x")
    with pytest.raises(ConfigError, match="would be read as 'medqa' plus a suffix"):
        registry.register(Benchmark(key="medqa_x", title="x"))
    with pytest.raises(ConfigError, match="unknown benchmark 'medqaa' \\(did you mean 'medqa'\\?\\)"):
        registry.get("medqaa")


# ------------------------------------------------------------------------------------------------ the docs

CONTRIBUTING = ROOT / "docs" / "contributing.md"
FOUNDATION = ROOT / "docs" / "foundation.md"
TABLE = re.compile(r"(<!-- benchmarks:registry -->\n)(.*?)(<!-- /benchmarks -->)", re.S)


def _checklist() -> str:
    text = CONTRIBUTING.read_text(encoding="utf-8")
    start = text.index("## Add a benchmark")
    end = text.find("\n## ", start + 1)
    return text[start:end if end > 0 else None]


def test_the_add_a_benchmark_checklist_names_the_files_a_benchmark_touches() -> None:
    checklist = _checklist()
    paths = set(re.findall(r"`((?:src|tests|docs)/[^`\s]+|CHANGELOG\.md)`", checklist))
    # every file it names exists (a <key> stands for any registered benchmark's key)
    for path in paths:
        if "<key>" in path:
            assert (ROOT / path.replace("<key>", "medqa")).exists(), path
        elif "*" not in path:
            assert (ROOT / path).exists(), path
    # it names every file the registry generates for a benchmark, the registry itself and the demo folder
    for generated in task_yaml.files_for(FAKE):
        pattern = f"src/medfuzz/tasks/lm_eval/yaml/{generated.replace('fakebench', '<key>')}"
        assert pattern in paths, pattern
    assert {"src/medfuzz/benchmarks/registry.py", "src/medfuzz/benchmarks/columns.py",
            "src/medfuzz/benchmarks/data/NOTICE.md", "CHANGELOG.md"} <= paths
    assert "python -m medfuzz.tasks.lm_eval.task_yaml" in checklist
    # and the fields it tells a contributor to fill are the declaration's fields
    import dataclasses

    named = set(re.findall(r"`(\w+)=`", checklist))
    assert named == {f.name for f in dataclasses.fields(Benchmark)}, named ^ {f.name for f in dataclasses.fields(
        Benchmark)}
    assert "contributing.md" in (ROOT / "docs" / "README.md").read_text(encoding="utf-8")


def test_the_benchmark_table_in_foundation_is_generated_from_the_registry() -> None:
    text = FOUNDATION.read_text(encoding="utf-8")
    match = TABLE.search(text)
    assert match, f"{FOUNDATION}: markers <!-- benchmarks:registry --> ... <!-- /benchmarks --> not found"
    generated = registry.table() + "\n"
    if os.environ.get("MEDFUZZ_REGENERATE_DOCS"):
        text = text[:match.start(2)] + generated + text[match.end(2):]
        FOUNDATION.write_text(text, encoding="utf-8")
        match = TABLE.search(text)
    assert match.group(2) == generated, "docs/foundation.md benchmark table is out of date (module docstring)"
