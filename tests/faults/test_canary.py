"""No API key leaks (e2e): a unique canary key is set by every route medfuzz accepts — the environment variable of
an Inspect provider (task model and a model role), ``OPENAI_API_KEY`` for the lm-eval attack path, and a
variable named by ``api_key_env`` — runs go through the fault server (which checks the key arrived), and then no
log, ``.eval`` archive, cache file or report under the run's folders contains the key."""

from __future__ import annotations

import os
import uuid
import zipfile
from pathlib import Path

import pytest

from tests.faults.server import FaultServer
from tests.faults.suite import environment

pytestmark = pytest.mark.e2e


def files_containing(root: Path, secret: str) -> list[str]:
    """Every file (and every member of a zip archive such as an ``.eval`` log) under ``root`` holding ``secret``."""
    needle = secret.encode()
    found = []
    for path in root.rglob("*"):
        if not path.is_file():
            continue
        data = path.read_bytes()
        if needle in data:
            found.append(str(path))
        if zipfile.is_zipfile(path):
            with zipfile.ZipFile(path) as archive:
                found += [f"{path}!{name}" for name in archive.namelist() if needle in archive.read(name)]
    return found


def test_a_canary_key_reaches_the_server_and_nothing_on_disk(tmp_path: Path) -> None:
    from inspect_ai import eval as inspect_eval

    from medfuzz.report import render_all
    from medfuzz.tasks.inspect.baselines import medqa_clean
    from medfuzz.tasks.inspect.medfuzz import medfuzz_medqa
    from medfuzz.tasks.lm_eval.medfuzz import attack_with_cache

    canary = f"sk-canary-{uuid.uuid4().hex}"
    logs, caches, report = tmp_path / "logs", tmp_path / "cache", tmp_path / "report"
    with FaultServer() as server:
        env = {**server.env(api_key=canary), "MEDFUZZ_CALL_CACHE": "1W", "MEDFUZZ_CACHE": str(caches),
               "INSPECT_CACHE_DIR": str(caches / "inspect"), "OPENAI_API_KEY": canary, "MY_CANARY_KEY": canary}
        with environment(env):
            tiny = {"data": "demo", "limit": 1, "turns": 1, "replicates": 1, "exemplars": 0, "controls": 0,
                    "max_tokens_scale": 0.25}
            inspect_eval([medqa_clean(data="demo", limit=2), medfuzz_medqa(**tiny)], model=server.inspect_model,
                         model_roles={"attacker": server.inspect_model}, log_dir=str(logs), display="none")
            for route in ({}, {"api_key_env": "MY_CANARY_KEY"}):
                attack_with_cache("medqa", target_base_url=server.base_url, target_model="fault-model",
                                  data="demo", attack_limit=1, turns=1, replicates=1, exemplars=0, controls=0,
                                  max_tokens_scale=0.25, seed=len(route), cache_dir=str(caches / "attacks"))
            render_all([logs], report)
        seen = server.stats.authorization
    assert seen and all(header == f"Bearer {canary}" for header in seen)  # every route used the key
    assert list(logs.glob("*.eval")) and list((caches / "calls").rglob("*.json")) and list(report.iterdir())
    assert list((caches / "attacks").glob("*.jsonl")) and list((caches / "inspect").rglob("*"))
    assert files_containing(tmp_path, canary) == []
    assert canary not in os.environ.get("MY_CANARY_KEY", "")  # restored after the run
