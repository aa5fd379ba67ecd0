"""``medfuzz run --shard auto``: the shard from Slurm job array and Kubernetes Indexed Job variables (issue 28)."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from medfuzz.cli.suite.shard import parse_shard
from medfuzz.errors import MedfuzzError

SCHEDULER_VARIABLES = ("SLURM_ARRAY_TASK_ID", "SLURM_ARRAY_TASK_COUNT", "SLURM_ARRAY_TASK_MIN",
                       "SLURM_ARRAY_TASK_MAX", "SLURM_ARRAY_TASK_STEP", "JOB_COMPLETION_INDEX", "MEDFUZZ_SHARD_COUNT")


def slurm(task: int, first: int, last: int, step: int = 1) -> dict[str, str]:
    """What Slurm sets in a task of ``sbatch --array=FIRST-LAST:STEP``."""
    count = (last - first) // step + 1
    return {"SLURM_ARRAY_TASK_ID": str(task), "SLURM_ARRAY_TASK_COUNT": str(count),
            "SLURM_ARRAY_TASK_MIN": str(first), "SLURM_ARRAY_TASK_MAX": str(last), "SLURM_ARRAY_TASK_STEP": str(step)}


def pair(text: str, environ: dict[str, str]) -> tuple[int, int]:
    shard = parse_shard(text, environ)
    assert shard is not None
    return shard.as_pair()


def test_given_shards_and_none() -> None:
    assert parse_shard(None, {}) is None
    assert pair(" 2 / 4 ", {}) == (2, 4)
    with pytest.raises(MedfuzzError, match="expected K/N"):
        parse_shard("2-4", {})


@pytest.mark.parametrize(("environ", "expected"), [
    (slurm(0, 0, 3), (1, 4)), (slurm(3, 0, 3), (4, 4)),  # --array=0-3
    (slurm(1, 1, 8), (1, 8)), (slurm(8, 1, 8), (8, 8)),  # --array=1-8: SLURM_ARRAY_TASK_MIN is the offset
    (slurm(14, 10, 16, 2), (3, 4)),  # --array=10-16:2 -> ids 10, 12, 14, 16
    ({"SLURM_ARRAY_TASK_ID": "2", "SLURM_ARRAY_TASK_COUNT": "5"}, (3, 5)),  # no MIN: ids from 0
])
def test_slurm_array(environ: dict[str, str], expected: tuple[int, int]) -> None:
    assert pair("auto", environ) == expected
    assert pair(f"auto/{expected[1]}", environ) == expected


def test_every_task_of_an_array_gets_its_own_shard() -> None:
    assert sorted(pair("auto", slurm(task, 5, 12)) for task in range(5, 13)) == [(k, 8) for k in range(1, 9)]


@pytest.mark.parametrize(("environ", "message"), [
    ({"SLURM_ARRAY_TASK_ID": "3"}, "SLURM_ARRAY_TASK_COUNT is not"),
    ({**slurm(3, 1, 7), "SLURM_ARRAY_TASK_MAX": "9"}, "not one range"),  # --array=1,3,5,9 style lists
    ({**slurm(3, 1, 7), "SLURM_ARRAY_TASK_MIN": "4"}, "not one range"),
    (slurm(13, 10, 16, 2), "not one range"),  # not on the step
    ({"SLURM_ARRAY_TASK_ID": "x", "SLURM_ARRAY_TASK_COUNT": "4"}, "not a non-negative integer"),
])
def test_slurm_errors(environ: dict[str, str], message: str) -> None:
    with pytest.raises(MedfuzzError, match=message):
        parse_shard("auto", environ)


def test_slurm_count_must_match_an_explicit_count() -> None:
    with pytest.raises(MedfuzzError, match="has 4 tasks"):
        parse_shard("auto/5", slurm(0, 0, 3))


def test_kubernetes_indexed_job() -> None:
    assert pair("auto/3", {"JOB_COMPLETION_INDEX": "0"}) == (1, 3)
    assert pair("auto/3", {"JOB_COMPLETION_INDEX": "2"}) == (3, 3)
    assert pair("auto", {"JOB_COMPLETION_INDEX": "1", "MEDFUZZ_SHARD_COUNT": "4"}) == (2, 4)
    assert pair("auto/2", {"JOB_COMPLETION_INDEX": "1", "MEDFUZZ_SHARD_COUNT": "4"}) == (2, 2)  # the flag wins
    with pytest.raises(MedfuzzError, match="gives no count"):
        parse_shard("auto", {"JOB_COMPLETION_INDEX": "1"})
    with pytest.raises(MedfuzzError, match=r"outside 0\.\.2"):
        parse_shard("auto/3", {"JOB_COMPLETION_INDEX": "3"})


def test_no_scheduler_or_two_schedulers() -> None:
    with pytest.raises(MedfuzzError, match=r"no scheduler index in the environment.*SLURM_ARRAY_TASK_ID.*"
                                            r"JOB_COMPLETION_INDEX"):
        parse_shard("auto", {"HOME": "/root"})
    with pytest.raises(MedfuzzError, match="both"):
        parse_shard("auto", {**slurm(0, 0, 1), "JOB_COMPLETION_INDEX": "0"})


def test_medfuzz_run_takes_the_shard_from_the_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    from medfuzz.cli import run as run_cli

    for name in SCHEDULER_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    for name, value in slurm(2, 0, 2).items():
        monkeypatch.setenv(name, value)
    parser = argparse.ArgumentParser()
    run_cli.add_parser(parser.add_subparsers())
    args = parser.parse_args(["run", "--model", "openai-api/vllm/m", "--shard", "auto", "--out", str(tmp_path)])
    plan = run_cli.plan_from(args)
    assert plan.shard == (3, 3) and plan.settings()["shard"] == "3/3"
    assert "shard 3/3 (Slurm array task 2 of 0-2)" in capsys.readouterr().out
