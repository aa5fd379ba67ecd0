"""``--shard K/N``: the slices, the plan, and merging shard logs into one run (complete, incomplete, retried).
That merged numbers equal one unsharded run's is checked end to end in ``tests/e2e/test_shards_e2e.py``."""

from __future__ import annotations

import argparse
import itertools
from pathlib import Path

import pytest

from medfuzz.cli.suite.build import build_tasks
from medfuzz.cli.suite.plan import SuitePlan
from medfuzz.errors import MedfuzzError
from medfuzz.options import ConfigError
from medfuzz.records.keys import SHARD_KEY
from medfuzz.tasks.inspect.shards import shard_range


@pytest.mark.parametrize("total", [0, 1, 2, 5, 7, 13, 1273])
@pytest.mark.parametrize("n", [1, 2, 3, 4, 8])
def test_the_slices_cover_every_sample_once_in_order_and_differ_by_at_most_one(total: int, n: int) -> None:
    slices = [shard_range(total, k, n) for k in range(1, n + 1)]
    assert slices[0][0] == 0 and slices[-1][1] == total
    assert all(a[1] == b[0] for a, b in itertools.pairwise(slices))
    sizes = [end - start for start, end in slices]
    assert max(sizes) - min(sizes) <= 1 and sum(sizes) == total


def test_shard_option_is_checked() -> None:
    from medfuzz.cli.suite.shard import shard_pair as _shard

    assert _shard("2/4") == (2, 4) and _shard(None) is None
    with pytest.raises(MedfuzzError, match="expected K/N"):
        _shard("2of4")
    for bad in ((0, 4), (5, 4)):
        with pytest.raises(ConfigError, match="--shard"):
            SuitePlan(model="openai-api/vllm/m", out=Path("x"), shard=bad)


def test_a_shard_plan_cuts_every_run_and_records_the_slice(tmp_path: Path) -> None:
    plan = SuitePlan(model="openai-api/vllm/m", out=tmp_path, data="demo", methods=("baseline", "medfuzz"),
                     limit=5, shard=(2, 2))
    built = {run.label: task for run, task in build_tasks(plan)}
    whole = {run.label: task for run, task in build_tasks(SuitePlan(model="openai-api/vllm/m", out=tmp_path,
                                                                      data="demo", methods=("baseline", "medfuzz"),
                                                                      limit=5))}
    for label, task in built.items():
        assert [s.id for s in task.dataset] == [s.id for s in whole[label].dataset][2:5]
        assert task.metadata[SHARD_KEY] == {"index": 2, "count": 2, "samples": 5, "start": 2, "end": 5}
    assert plan.settings()["shard"] == "2/2"
    # more shards than samples: an empty slice runs nothing (the other shards cover every sample)
    tiny = SuitePlan(model="openai-api/vllm/m", out=tmp_path, data="demo", methods=("baseline",), limit=1,
                     shard=(1, 2))
    assert build_tasks(tiny) == []


# ------------------------------------------------------------------------------------------- merging


def _shard_logs(folder: Path, n: int, replies: list[str], shards: tuple[int, ...]) -> list[Path]:
    """The clean baseline over 4 demo items, as shards ``shards`` of ``n``, with the scripted model."""
    from inspect_ai import eval as inspect_eval

    from medfuzz.tasks.inspect.baselines import medqa_clean
    from medfuzz.tasks.inspect.shards import shard_task
    from tests.scripted_inspect import SCRIPT

    paths = []
    for k in shards:
        task = shard_task(medqa_clean(data="demo", limit=4), k, n)
        SCRIPT[:] = list(replies[slice(*shard_range(4, k, n))])
        [log] = inspect_eval(task, model="medfuzz-scripted/x", log_dir=str(folder / str(k)), display="none")
        paths.append(Path(log.location))
    return paths


@pytest.fixture(scope="module")
def shard_set(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[Path], Path]:
    from inspect_ai import eval as inspect_eval

    from medfuzz.tasks.inspect.baselines import medqa_clean
    from tests.scripted_inspect import SCRIPT

    folder = tmp_path_factory.mktemp("shards")
    replies = ["ANSWER: C", "ANSWER: B", "ANSWER: D", "ANSWER: A"]  # demo keys C, A, D, ...
    SCRIPT[:] = list(replies)
    [whole] = inspect_eval(medqa_clean(data="demo", limit=4), model="medfuzz-scripted/x",
                           log_dir=str(folder / "whole"), display="none")
    return folder, _shard_logs(folder, 2, replies, (1, 2)), Path(whole.location)


def _merged(paths: list[Path], out: Path):
    from inspect_ai.log import read_eval_log

    from medfuzz.report.log_reader import read_once
    from medfuzz.report.shards import merge_shards

    with read_once():
        [path] = merge_shards(paths, out)
    return read_eval_log(str(path))


def test_two_shards_merge_into_the_whole_runs_numbers(shard_set, tmp_path: Path) -> None:
    from inspect_ai.log import read_eval_log

    _, paths, whole_path = shard_set
    merged, whole = _merged(paths, tmp_path), read_eval_log(str(whole_path))
    assert merged.status == "success" and SHARD_KEY not in merged.eval.metadata
    assert [s.id for s in merged.samples] == [s.id for s in whole.samples]
    values = lambda log: {f"{s.name}/{n}": m.value for s in log.results.scores for n, m in s.metrics.items()}  # noqa: E731
    assert values(merged) == values(whole) and values(whole)["baseline_choice/baseline_acc"] == 0.5
    assert merged.eval.dataset.samples == 4 and merged.eval.metadata["medfuzz_merged_shards"]["count"] == 2
    assert [(e.shard, e.samples, e.status) for e in merged.eval.shards.ledger] == [("1", 2, "success"),
                                                                                   ("2", 2, "success")]


def test_a_missing_shard_makes_a_run_with_an_error_not_a_result(shard_set, tmp_path: Path) -> None:
    from medfuzz.report.index import run_problem

    _, paths, _ = shard_set
    merged = _merged(paths[:1], tmp_path)
    assert merged.status == "error"
    assert "samples 2-3 (no shard log covers them)" in merged.error.message
    assert run_problem(merged).startswith("Run error: shards of this run, merged: 1 shard log(s) of 2")


def test_a_retried_shard_counts_once_and_its_finished_attempt_wins(shard_set, tmp_path: Path) -> None:
    from inspect_ai.log import read_eval_log, write_eval_log

    _, paths, _ = shard_set
    failed = read_eval_log(str(paths[1]))
    failed = failed.model_copy(update={"status": "error", "samples": failed.samples[:1]})
    failed_path = tmp_path / "failed-attempt.eval"
    write_eval_log(failed, str(failed_path))
    merged = _merged([*paths, failed_path], tmp_path)
    assert merged.status == "success" and len(merged.samples) == 4
    only_failed = _merged([paths[0], failed_path], tmp_path / "second")
    assert only_failed.status == "error" and "shard 2/2 (error) did not finish" in only_failed.error.message


def test_the_report_reads_shards_as_one_run(shard_set, tmp_path: Path) -> None:
    from medfuzz.cli.report import _report

    _, paths, _ = shard_set
    assert _report(argparse.Namespace(logs=[str(p) for p in paths], out=str(tmp_path / "report"))) == 0
    merged = list((tmp_path / "report" / "merged-shards").glob("*.eval"))
    assert len(merged) == 1

    def page() -> str:
        return (tmp_path / "report" / "index.html").read_text(encoding="utf-8")

    assert "Clean baselines (1 run)" in page() and page().count("medqa_clean · medfuzz-scripted/x") == 1
    # reporting again over the shards and the merged log together does not count the run twice
    assert _report(argparse.Namespace(logs=[str(p) for p in (*paths, *merged)], out=str(tmp_path / "report"))) == 0
    assert len(list((tmp_path / "report" / "merged-shards").glob("*.eval"))) == 1
    assert "Clean baselines (1 run)" in page()
    # the merged log alone is the run too
    assert _report(argparse.Namespace(logs=[str(p) for p in merged], out=str(tmp_path / "again"))) == 0
    assert "Clean baselines (1 run)" in (tmp_path / "again" / "index.html").read_text(encoding="utf-8")
