"""No API key leaks (e2e): a unique canary key is set by every route medfuzz accepts — the environment variable of
an Inspect provider (task model and a model role), ``OPENAI_API_KEY`` for the lm-eval attack path, and a
variable named by ``api_key_env`` — runs go through the fault server (which checks the key arrived), and then no
log, ``.eval`` archive, cache file or report under the run's folders contains the key. The same holds when the
server answers 401 with a body that echoes the key (Inspect's four tasks, the lm-eval attack path and lm-eval's own
API model), for Inspect's trace log too, and a key passed to lm-eval as a model argument is refused."""

from __future__ import annotations

import contextlib
import gzip
import json
import os
import subprocess
import uuid
import zipfile
from pathlib import Path

import pytest

from tests.e2e.conftest import cli
from tests.faults.server import FaultServer, Schedule
from tests.faults.suite import build_task, environment

pytestmark = pytest.mark.e2e


def files_containing(root: Path, secret: str) -> list[str]:
    """Every file (and every member of a zip archive such as an ``.eval`` log, and the text of a gzip file such
    as a compressed trace log) under ``root`` (a folder or one file) holding ``secret``."""
    with contextlib.suppress(ImportError):  # zstd for zipfile before Python 3.14 (Inspect's .eval members use it)
        import zipfile_zstd  # noqa: F401

    needle = secret.encode()
    found = []
    for path in (root.rglob("*") if root.is_dir() else [root]):
        if not path.is_file():
            continue
        data = path.read_bytes()
        if data[:2] == b"\x1f\x8b":
            data += gzip.decompress(data)
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


def inspect_trace_log() -> bytes:
    """What Inspect's trace log of this process holds (``INSPECT_TRACE_FILE``, else one file per process under its
    data folder). Read through the handler's open stream (``/proc/self/fd``), not its path: every Inspect process
    that starts keeps only the 10 newest trace files, so the CLIs a test suite runs remove this process's file
    from the folder while its handler still writes to it."""
    from inspect_ai._util.logger import _logHandler

    handler = _logHandler["handler"]
    assert handler is not None and handler.trace_logger is not None, "Inspect has not set up its logging yet"
    handler.trace_logger.flush()
    stream = handler.trace_logger.stream
    assert stream is not None, "Inspect's trace log is closed"
    return Path(f"/proc/self/fd/{stream.fileno()}").read_bytes()


def _lm_eval(out: Path, name: str, model_args: str, env: dict[str, str]) -> tuple[int, str]:
    """``medfuzz-lm-eval`` on two ``medqa_clean`` docs, its console kept in ``out/<name>.out`` as ``medfuzz run``
    keeps it (``OUT/lm-eval.out``)."""
    log = out / f"{name}.out"
    with log.open("w") as handle:
        done = subprocess.run([cli("medfuzz-lm-eval"), "--model", "local-completions", "--model_args", model_args,
                               "--tasks", "medqa_clean", "--metadata", '{"data": "demo"}', "--limit", "2",
                               "--output_path", str(out / name), "--log_samples"],
                              stdout=handle, stderr=subprocess.STDOUT, env={**os.environ, **env}, timeout=300)
    return done.returncode, log.read_text(errors="replace")


def test_a_key_echoed_by_a_401_or_passed_as_a_model_argument_reaches_no_file(tmp_path: Path) -> None:
    from inspect_ai import eval as inspect_eval
    from inspect_ai.model import get_model

    from medfuzz.models.failures import ModelConfigError
    from medfuzz.planted.server import serve
    from medfuzz.tasks.inspect.baselines import medqa_clean
    from medfuzz.tasks.inspect.medfuzz import medfuzz_medqa
    from medfuzz.tasks.inspect.medguard import medguard
    from medfuzz.tasks.lm_eval.medfuzz import attack_with_cache

    canary = f"sk-canary-{uuid.uuid4().hex}"
    run = tmp_path / "run"
    run.mkdir()
    with FaultServer(Schedule(kind="auth_echo")) as server:
        env = {**server.env(api_key=canary), "OPENAI_API_KEY": canary, "MEDFUZZ_CACHE": str(run / "cache"),
               "INSPECT_CACHE_DIR": str(run / "cache" / "inspect")}
        completions = f"model=fault-model,base_url={server.base_url}/completions,tokenizer_backend=remote," \
                      "num_concurrent=1,max_retries=1"
        with environment(env):
            tiny = {"data": "demo", "limit": 1, "turns": 1, "replicates": 1, "exemplars": 0, "controls": 0,
                    "max_tokens_scale": 0.25}
            # a model of its own (not Inspect's memoized one of another test's server); its key from FAULTS_API_KEY
            model = get_model(server.inspect_model, base_url=server.base_url, memoize=False)
            logs = inspect_eval([medqa_clean(data="demo", limit=2),
                                 medguard(aspects="defense", limit_per_aspect=2, strategy="basic"),
                                 medfuzz_medqa(**tiny), build_task("tces_medqa")], model=model,
                                model_roles={"attacker": model}, log_dir=str(run / "logs"), display="none")
            with pytest.raises(ModelConfigError, match=r"HTTP 401.*\[redacted\]"):
                attack_with_cache("medqa", target_base_url=server.base_url, target_model="fault-model",
                                  data="demo", attack_limit=1, turns=1, replicates=1, exemplars=0, controls=0,
                                  max_tokens_scale=0.25, cache_dir=str(run / "cache" / "attacks"))
        echoed_code, echoed = _lm_eval(run, "lm-eval-401", completions, env)
        seen = server.stats.authorization
    with serve() as planted:  # a server that answers: without the refusal lm-eval writes results with the key
        model_args = f"model={planted.target_name},base_url={planted.base_url}/completions,tokenizer_backend=remote"
        refused_code, refused = _lm_eval(run, "lm-eval-key", f"{model_args},api_key={canary}", {})
    assert seen and all(header == f"Bearer {canary}" for header in seen)  # each route sent the key, to be echoed
    assert [log.status for log in logs] == ["error"] * 4 and all("HTTP 401" in log.error.message for log in logs)
    assert len(files_containing(run / "logs", "Incorrect API key provided: [redacted]")) >= 4  # the echo, logged
    assert echoed_code != 0 and "Incorrect API key provided: [redacted]" in echoed  # lm-eval logged the body
    assert refused_code != 0 and "api_key: a secret, refused" in refused and "OPENAI_API_KEY" in refused
    assert not list((run / "lm-eval-key").rglob("results_*.json"))
    trace = inspect_trace_log()
    assert b"Error code: 401" in trace  # Inspect traced the provider's errors, redacted
    assert files_containing(tmp_path, canary) == [] and canary.encode() not in trace


def test_a_key_echoed_inside_a_200_reply_reaches_nothing_medfuzz_writes(tmp_path: Path) -> None:
    """The endpoint answers 200 with the key in the reply text: every method quotes such an unparseable reply in
    its own messages (scores' explanations and metadata, LLM-error reasons, the call cache, the report). Inspect's
    own record of the model's output (its transcript) is Inspect's and keeps what the model said."""
    from inspect_ai import eval as inspect_eval
    from inspect_ai.model import get_model

    from medfuzz.report import render_all
    from medfuzz.tasks.inspect.baselines import medqa_clean
    from medfuzz.tasks.inspect.medfuzz import medfuzz_medqa
    from medfuzz.tasks.inspect.medguard import medguard
    from medfuzz.tasks.lm_eval.medfuzz import attack_with_cache

    canary = f"sk-canary-{uuid.uuid4().hex}"
    run = tmp_path / "run"
    with FaultServer(Schedule(kind="reply_echo")) as server:
        env = {**server.env(api_key=canary), "OPENAI_API_KEY": canary, "MEDFUZZ_CALL_CACHE": "1W",
               "MEDFUZZ_CACHE": str(run / "cache"), "INSPECT_CACHE_DIR": str(run / "cache" / "inspect")}
        with environment(env):
            tiny = {"data": "demo", "limit": 1, "turns": 1, "replicates": 1, "exemplars": 0, "controls": 0,
                    "max_tokens_scale": 0.25}
            model = get_model(server.inspect_model, base_url=server.base_url, memoize=False)
            logs = inspect_eval([medqa_clean(data="demo", limit=2),
                                 medguard(aspects="defense", limit_per_aspect=2, strategy="basic"),
                                 medfuzz_medqa(**tiny), build_task("tces_medqa")], model=model,
                                model_roles={"attacker": model}, log_dir=str(run / "logs"), display="none")
            attacked = attack_with_cache("medqa", target_base_url=server.base_url, target_model="fault-model",
                                         data="demo", attack_limit=1, turns=1, replicates=1, exemplars=0,
                                         controls=0, max_tokens_scale=0.25, cache_dir=str(run / "cache" / "attacks"))
            render_all([run / "logs"], run / "report")
    assert attacked and len(logs) == 4
    quoted = []  # what medfuzz wrote into the logs: every score (value, explanation, metadata), sample metadata
    for log in logs:
        for sample in log.samples or []:
            text = json.dumps([{k: s.model_dump() for k, s in (sample.scores or {}).items()}, sample.metadata,
                               sample.error.message if sample.error else None], default=str)
            quoted.append(text)
    assert any("[redacted]" in text for text in quoted)  # the echo was quoted, redacted
    assert not [text for text in quoted if canary in text]
    assert files_containing(run / "report", canary) == [] and list((run / "report").iterdir())
    assert files_containing(run / "cache" / "calls", canary) == []
    assert files_containing(run / "cache" / "attacks", canary) == []
