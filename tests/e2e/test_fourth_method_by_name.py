"""A method registered from outside medfuzz runs in plain ``inspect eval <task>`` by name and lands in
``medfuzz report``: its spec names its task module (``Method.task_module``), medfuzz's Inspect entry point
(``medfuzz._registry``) imports it, which registers the task; nothing inside medfuzz is edited. The real CLIs
run in subprocesses, each importing the module that registers the spec first (what the method's own package
does when it is imported)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from medfuzz.planted.server import PlantedServer

pytestmark = pytest.mark.e2e

TASK = "registry_probe_cli"

PROBE_TASKS = f'''
from inspect_ai import Task, task
from inspect_ai.dataset import Sample
from inspect_ai.scorer import Score, Target, mean, scorer
from inspect_ai.solver import TaskState, generate

from medfuzz.benchmarks.selection import DataSelection
from medfuzz.records.keys import METHOD_KEY


@scorer(metrics=[mean()])
def probe_scorer():
    async def score(state: TaskState, target: Target) -> Score:
        return Score(value=float(f"ANSWER: {{target.text}}" in state.output.completion))
    return score


@task(name="{TASK}")
def registry_probe_cli(limit: int = 4) -> Task:
    items = DataSelection("demo", None, limit, False).items("medqa", 0)
    samples = [Sample(input=item.question + "\\n" + "\\n".join(f"{{k}}. {{v}}" for k, v in item.options.items())
                      + "\\nEnd with 'ANSWER: X'.", target=item.answer, id=item.id) for item in items]
    return Task(dataset=samples, solver=generate(), scorer=probe_scorer(), metadata={{METHOD_KEY: "probe"}})
'''

PROBE_SPEC = f'''
from medfuzz.records.methods import Method, register

register(Method(key="probe", title="Probe", section="Probe runs", blurb="A method of another package.",
                inspect_task="{TASK}", task_module="probe_tasks", run_rank=1.5, headline=("mean",),
                labels={{"mean": "probe accuracy"}}))
'''


def _python(tmp_path: Path, imports: str, entry: str, args: list[str],
            env: dict[str, str]) -> subprocess.CompletedProcess:
    """``python -c "<imports>; <entry>()" ARGS`` with the probe's modules importable (``tmp_path``)."""
    code = f"import sys; {imports}; from {entry.rpartition('.')[0]} import {entry.rpartition('.')[2]} as m; " \
           "sys.argv[0] = 'cli'; sys.exit(m())"
    path = os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")])
    return subprocess.run([sys.executable, "-c", code, *args], env={**os.environ, **env, "PYTHONPATH": path},
                          capture_output=True, text=True, timeout=600, check=False)


def test_a_method_registered_outside_medfuzz_runs_by_name_and_is_reported(tmp_path: Path,
                                                                          planted: PlantedServer) -> None:
    (tmp_path / "probe_tasks.py").write_text(textwrap.dedent(PROBE_TASKS))
    (tmp_path / "probe_spec.py").write_text(textwrap.dedent(PROBE_SPEC))
    logs = tmp_path / "logs"
    evaluate = ["eval", TASK, "--model", planted.inspect_model(), "--log-dir", str(logs), "--display", "plain"]
    # without its spec no module defines the task: Inspect does not know the name (the control)
    unknown = _python(tmp_path, "pass", "inspect_ai._cli.main.main", evaluate, planted.inspect_env())
    assert unknown.returncode != 0 and "No inspect tasks were found" in unknown.stdout and not logs.exists()
    ran = _python(tmp_path, "import probe_spec", "inspect_ai._cli.main.main", evaluate, planted.inspect_env())
    assert ran.returncode == 0, ran.stdout[-3000:] + ran.stderr[-3000:]
    [log_file] = logs.glob("*.eval")
    from inspect_ai.log import read_eval_log

    samples = read_eval_log(str(log_file)).samples or []
    assert len(samples) == 4
    report = _python(tmp_path, "import probe_spec", "medfuzz.cli.main", ["report", str(logs), "--out",
                                                                           str(tmp_path / "report")], {})
    assert report.returncode == 0, report.stdout[-3000:] + report.stderr[-3000:]
    summary = json.loads((tmp_path / "report" / "summary.json").read_text())
    [card] = summary["models"].values()
    [result] = card["results"]
    assert (result["method"], result["title"]) == ("probe", f"Probe · {TASK}")
    recount = sum(s.scores["probe_scorer"].value for s in samples) / len(samples)
    assert result["numbers"]["mean"]["value"] == pytest.approx(recount, abs=1e-12)
    assert result["numbers"]["mean"]["label"] == "probe accuracy"
