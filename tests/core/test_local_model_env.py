"""The embedded model's OpenMP environment (issue 28): passive waiting by default, the user's value wins."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from medfuzz.errors import ModelUnavailableError
from medfuzz.models import local


class _ExitedProcess:
    """What ``subprocess.Popen`` returns for a server that exits at once (so ``launch_server`` stops waiting)."""

    returncode = 3

    def __init__(self, command: list[str], **kwargs: Any) -> None:
        self.command, self.kwargs = command, kwargs

    def poll(self) -> int:
        return self.returncode


def _launched_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> tuple[list[str], dict[str, str]]:
    started: list[_ExitedProcess] = []

    def popen(command: list[str], **kwargs: Any) -> _ExitedProcess:
        started.append(_ExitedProcess(command, **kwargs))
        return started[-1]

    monkeypatch.setattr(local.subprocess, "Popen", popen)
    monkeypatch.setattr(local.importlib.util, "find_spec", lambda name: object())
    model = tmp_path / "model.gguf"
    model.write_bytes(b"")
    with pytest.raises(ModelUnavailableError, match="exited with code 3"):
        local.launch_server(port=1, model_path=model, log_path=tmp_path / "server.log", startup_timeout=5)
    (process,) = started
    return process.command, process.kwargs["env"]


def test_server_waits_passively_by_default(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("OMP_WAIT_POLICY", raising=False)
    monkeypatch.setenv("MEDFUZZ_TEST_MARK", "kept")
    command, env = _launched_environment(monkeypatch, tmp_path)
    assert env["OMP_WAIT_POLICY"] == "passive"
    assert env["MEDFUZZ_TEST_MARK"] == "kept"  # the rest of the environment is passed on
    assert "OMP_WAIT_POLICY" not in os.environ  # ours is not changed for the server's sake
    threads = command[command.index("--n_threads") + 1]
    assert threads == str(local.default_threads())


def test_users_wait_policy_wins(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("OMP_WAIT_POLICY", "ACTIVE")
    _, env = _launched_environment(monkeypatch, tmp_path)
    assert env["OMP_WAIT_POLICY"] == "ACTIVE"


def test_in_process_defaults_keep_users_value(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OMP_WAIT_POLICY", raising=False)
    local.apply_openmp_defaults()
    assert os.environ["OMP_WAIT_POLICY"] == "passive"
    monkeypatch.setenv("OMP_WAIT_POLICY", "active")
    local.apply_openmp_defaults()
    assert os.environ["OMP_WAIT_POLICY"] == "active"


@pytest.mark.parametrize(("cores", "threads"), [({0}, 1), ({0, 1}, 2), (set(range(16)), 2)])
def test_default_threads_fit_the_cores_we_may_use(monkeypatch: pytest.MonkeyPatch, cores: set[int],
                                                  threads: int) -> None:
    monkeypatch.setattr(local.os, "sched_getaffinity", lambda pid: cores, raising=False)
    assert local.default_threads() == threads


def test_adapter_sets_the_policy_before_llama_cpp_is_imported() -> None:
    """A fresh interpreter: importing medfuzz's lm-eval model must set the policy without importing llama_cpp
    (it is imported when the model is built, after the policy is in the environment)."""
    import subprocess
    import sys

    pytest.importorskip("lm_eval")
    code = ("import os, sys; os.environ.pop('OMP_WAIT_POLICY', None); import medfuzz.adapters.llama_cpp_lm; "
            "print(os.environ.get('OMP_WAIT_POLICY'), 'llama_cpp' in sys.modules)")
    env = {**os.environ}
    env.pop("OMP_WAIT_POLICY", None)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True)
    assert out.stdout.split() == ["passive", "False"]


def test_the_embedded_model_generates_on_one_thread_and_evaluates_prompts_on_all(monkeypatch: pytest.MonkeyPatch,
                                                                                   tmp_path: Path) -> None:
    """SmolLM2's decode is faster on one thread (bench/embedded_contention.py); prompt batches keep the threads,
    and another model's generation too."""
    assert local.generation_threads(2, embedded=True) == 1 and local.generation_threads(4, embedded=False) == 4
    gguf = tmp_path / "smollm2.gguf"
    gguf.write_bytes(b"")
    monkeypatch.setattr(local, "embedded_gguf", lambda: gguf)
    started: list[list[str]] = []

    def popen(command: list[str], **kwargs: Any) -> _ExitedProcess:
        started.append(command)
        return _ExitedProcess(command, **kwargs)

    monkeypatch.setattr(local.subprocess, "Popen", popen)
    monkeypatch.setattr(local.importlib.util, "find_spec", lambda name: object())
    for model_path, generation in ((None, "1"), (gguf, "2")):
        with pytest.raises(ModelUnavailableError):
            local.launch_server(port=1, threads=2, model_path=model_path, log_path=tmp_path / "s.log",
                                startup_timeout=5)
        command = started[-1]
        assert command[command.index("--n_threads") + 1] == generation
        assert command[command.index("--n_threads_batch") + 1] == "2"
