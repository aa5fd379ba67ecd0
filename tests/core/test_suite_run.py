"""``run_suite_plan`` (``medfuzz.cli.suite.run``): a user error comes back as one line in the outcome, never as
``SystemExit``, and a dry run writes nothing. What the suite prints and writes on a real run is pinned through the
CLI by ``tests/faults/test_run_lifecycle.py`` and ``tests/e2e/test_first_real_run.py``."""

from __future__ import annotations

from pathlib import Path

import pytest

from medfuzz.cli.suite.plan import SuitePlan
from medfuzz.cli.suite.run import RunOptions, run_suite_plan


def never(*args: object) -> None:
    raise AssertionError(f"called with {args}: nothing ran, so nothing is summarised or reported")


def small(out: Path) -> SuitePlan:
    return SuitePlan(model="openai-api/vllm/m", out=out, level="quick", methods=("baseline",), limit=2)


def test_an_out_that_is_a_file_is_an_error_in_the_outcome(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("")
    done = run_suite_plan(small(tmp_path / "file"), RunOptions(preflight=False), never, never)
    assert (done.code, done.error) == (1, f"--out {tmp_path / 'file'}: this is a file, not a folder; name a "
                                          "folder (it is created if missing)")


def test_a_secret_in_the_lm_eval_arguments_is_an_error_before_anything_runs(tmp_path: Path) -> None:
    done = run_suite_plan(small(tmp_path / "out"), RunOptions(lm_eval="hf:pretrained=x,api_key=sk-123"), never,
                          never)
    assert done.code == 1 and done.error is not None and done.error.startswith("--lm-eval: api_key: a secret")
    assert not (tmp_path / "out").exists()


def test_several_models_with_lm_eval_are_refused_before_anything_runs(tmp_path: Path) -> None:
    """``--lm-eval`` names one lm-eval model: with two ``--model`` values the run used to drop it half-way and
    exit 0; now it stops before any call (the dry run too), saying what to do."""
    plan = SuitePlan(model="openai-api/vllm/a,openai-api/vllm/b", out=tmp_path / "out", level="quick",
                     methods=("baseline",), limit=2)
    for dry_run in (False, True):
        done = run_suite_plan(plan, RunOptions(lm_eval="hf:pretrained=x", dry_run=dry_run), never, never)
        assert done.code == 1 and done.error is not None
        assert done.error.startswith("--lm-eval names one lm-eval model, and --model names 2: run medfuzz run "
                                     "once per model")
    assert not (tmp_path / "out").exists()


def test_a_failed_preflight_leaves_nothing_behind(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The folder the run created (and its lock) are gone when the first check fails; a folder that was there is
    kept, without the lock."""
    import socket

    with socket.socket() as sock:  # a port nothing listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    monkeypatch.setenv("VLLM_BASE_URL", f"http://127.0.0.1:{port}/v1")
    monkeypatch.setenv("VLLM_API_KEY", "k")
    done = run_suite_plan(small(tmp_path / "out"), RunOptions(), never, never)
    assert done.code == 1 and "cannot reach" in (done.error or "")
    assert not (tmp_path / "out").exists()
    (tmp_path / "kept").mkdir()
    done = run_suite_plan(small(tmp_path / "kept"), RunOptions(), never, never)
    assert done.code == 1 and (tmp_path / "kept").is_dir() and not list((tmp_path / "kept").iterdir())


def test_an_unwritable_or_full_out_is_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import errno

    from medfuzz.cli.suite import build as suite_build

    out = Path("/sys/medfuzz-test-out")  # not writable, even by root (EPERM)
    done = run_suite_plan(small(out), RunOptions(preflight=False), never, never)
    assert done.code == 1 and done.error is not None
    assert done.error.startswith(f"--out {out}: cannot write there: Operation not permitted. Choose a folder")

    def full(*args: object, **kwargs: object) -> None:
        raise OSError(errno.ENOSPC, "No space left on device", str(tmp_path / "out" / "run.json"))

    monkeypatch.setattr(suite_build, "build_tasks", full)
    done = run_suite_plan(small(tmp_path / "out"), RunOptions(preflight=False), never, never)
    assert done.code == 1 and done.error is not None and "\n" not in done.error
    assert done.error.startswith(f"--out {tmp_path / 'out'}: cannot write there: No space left on device ("
                                 f"{tmp_path / 'out' / 'run.json'})")
    # a permission error on something else (the data file, say) is not called an --out problem
    monkeypatch.setattr(suite_build, "build_tasks", lambda *a, **k: (_ for _ in ()).throw(
        PermissionError(errno.EACCES, "Permission denied", "/data/questions.jsonl")))
    with pytest.raises(PermissionError):
        run_suite_plan(small(tmp_path / "out2"), RunOptions(preflight=False), never, never)


def test_a_dry_run_prints_the_bound_and_writes_nothing(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    done = run_suite_plan(small(tmp_path / "out"), RunOptions(dry_run=True, preflight=False), never, never)
    printed = capsys.readouterr().out
    assert (done.code, done.error, done.logs) == (0, None, {})
    assert "  clean baseline       2 samples  at most          2 calls  (target 2)" in printed
    assert "  clean baseline  ~        2 calls (as the bound)  (target 2)" in printed  # the estimate beside it
    assert "dry run: no model was asked a question and nothing was written" in printed
    assert not (tmp_path / "out").exists()


def test_a_dry_run_checks_the_models_as_a_run_does(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    """The dry run makes the checks a run makes before its first paid call (``--no-preflight`` skips them): an
    endpoint with no URL is the same one line, before the tasks are built, and nothing is written."""
    monkeypatch.delenv("VLLM_BASE_URL", raising=False)
    done = run_suite_plan(small(tmp_path / "out"), RunOptions(dry_run=True), never, never)
    assert done.code == 1 and (done.error or "").startswith("openai-api/vllm/m: set VLLM_BASE_URL")
    assert "samples  at most" not in capsys.readouterr().out
    assert not (tmp_path / "out").exists()


def test_an_unknown_provider_is_one_line_in_the_outcome(tmp_path: Path) -> None:
    """Inspect's get_model says so with a bare ValueError, which reached the user as a traceback."""
    plan = SuitePlan(model="nosuchprovider/x", out=tmp_path / "out", level="quick", methods=("baseline",), limit=2)
    done = run_suite_plan(plan, RunOptions(preflight=False), never, never)
    assert done.code == 1 and done.error is not None
    assert done.error.startswith("Model API nosuchprovider of model 'nosuchprovider/x' not recognized")
    assert "providers.html" in done.error
