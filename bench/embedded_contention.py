"""The embedded model next to a busy process (issue 28, item 1): seconds per call for 1 and 2 llama.cpp threads,
quiet and next to one busy loop (``python -c "while True: pass"``), before (OpenMP's default wait policy, as
medfuzz ran it until this change) and after (``OMP_WAIT_POLICY=passive``, medfuzz's default now), for both paths:

- ``server``: the llama-cpp-python server ``medfuzz run`` / ``medfuzz serve`` start (``models.local``), one chat
  call of ``--tokens`` new tokens over HTTP. Before: the server launched with the environment as it was, without
  the policy (``models.local.model_environment`` replaced by a copy of the environment);
- ``in-process``: lm-eval's ``medfuzz-local`` model (``adapters.llama_cpp_lm``), one ``generate_until`` of
  ``--tokens`` tokens. Before: ``llama_cpp`` imported before medfuzz's adapter (OpenMP loads without the policy,
  as the adapter did until this change); after: the adapter imported first, as ``medfuzz-lm-eval`` does.

Every cell runs in its own process (OpenMP reads the policy once, when it loads), with one untimed warm-up call,
then up to ``--calls`` timed calls within ``--cell-seconds``; a cell that runs out of time prints how many calls
finished (``>`` the time per call so far). Greedy decoding: every call of a path makes the same tokens.

The machine may not be quiet: other processes share its cores. Each row prints ``os.getloadavg()`` (1-minute) at
its start and end, and "quiet" means only "no busy loop of ours"; compare rows by their load.

    PYTHONPATH=src python bench/embedded_contention.py [--paths server,in-process] [--calls 3] [--tokens 64]
        [--cell-seconds 90]
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace

PROMPT = ("A 45-year-old man has crushing chest pain radiating to the left arm for one hour, with sweating. "
          "List five possible diagnoses, and for each one the test that would confirm it, one line each.")
POLICIES = ("before", "after")


# ------------------------------------------------------------------------------------------------ worker side


def _server_calls(threads: int, policy: str, tokens: int, calls: int, record: Path) -> None:
    from medfuzz.models import local

    if policy == "before":  # the server's environment as it was: no OpenMP default added
        local.model_environment = lambda base=None: dict(os.environ if base is None else base)
    body = json.dumps({"model": local.MODEL_ALIAS, "messages": [{"role": "user", "content": PROMPT}],
                       "max_tokens": tokens, "temperature": 0.0}).encode()
    with local.start_server(threads=threads, log_path=record.with_suffix(".log")) as server:
        for call in range(calls + 1):
            started = time.perf_counter()
            request = urllib.request.Request(f"{server.base_url}/chat/completions", data=body,
                                             headers={"Content-Type": "application/json"})
            with urllib.request.urlopen(request, timeout=3600) as response:
                made = json.load(response)["usage"]["completion_tokens"]
            _record(record, call, time.perf_counter() - started, made)


def _in_process_calls(threads: int, policy: str, tokens: int, calls: int, record: Path) -> None:
    if policy == "before":  # OpenMP loads before medfuzz's adapter can set its default
        import llama_cpp  # noqa: F401
    from medfuzz.adapters.lm_eval_registry import register_models

    register_models()  # as medfuzz-lm-eval does: imports medfuzz.adapters.llama_cpp_lm
    from medfuzz.adapters.llama_cpp_lm import LlamaCppLM

    model = LlamaCppLM(n_threads=threads)
    chat = model.apply_chat_template([{"role": "user", "content": PROMPT}])  # the server's chat call, in-process
    request = SimpleNamespace(args=(chat, {"until": [], "max_gen_toks": tokens}))
    for call in range(calls + 1):
        started = time.perf_counter()
        (text,) = model.generate_until([request], disable_tqdm=True)
        _record(record, call, time.perf_counter() - started, len(model.tok_encode(text)))


def _record(record: Path, call: int, seconds: float, tokens: int) -> None:
    with record.open("a") as handle:
        handle.write(json.dumps({"call": call, "seconds": seconds, "tokens": tokens}) + "\n")


# ------------------------------------------------------------------------------------------- orchestrator side


@dataclass
class Cell:
    path: str
    policy: str
    threads: int
    busy: bool
    per_call: float  # seconds per timed call (a lower bound when not all finished)
    finished: int
    asked: int
    tokens: int
    load_start: float
    load_end: float
    warmed: bool  # the untimed first call finished

    def seconds(self) -> str:
        if not self.warmed:
            return "warm-up call unfinished"
        return f"{'>' if self.finished < self.asked else ''}{self.per_call:.2f}"


def run_cell(path: str, policy: str, threads: int, busy: bool, args: argparse.Namespace) -> Cell:
    env = {**os.environ}
    env.pop("OMP_WAIT_POLICY", None)  # the user sets none: "after" is medfuzz's default, "before" none
    loop = subprocess.Popen([sys.executable, "-c", "while True: pass"]) if busy else None
    load_start = os.getloadavg()[0]
    with tempfile.TemporaryDirectory() as folder:
        record = Path(folder) / "calls.jsonl"
        worker = subprocess.Popen([sys.executable, __file__, "--worker", path, "--policy", policy,
                                   "--threads", str(threads), "--tokens", str(args.tokens),
                                   "--calls", str(args.calls), "--record", str(record)],
                                  env=env, start_new_session=True, stdout=subprocess.DEVNULL,
                                  stderr=subprocess.DEVNULL)
        deadline, timed_from = time.monotonic() + args.cell_seconds + 120, None  # 120 s: load + warm-up
        while worker.poll() is None and time.monotonic() < deadline:
            time.sleep(0.2)
            if timed_from is None and record.exists() and record.read_text().strip():
                timed_from = time.monotonic()  # the warm-up call is done: the timed calls' budget starts
                deadline = min(deadline, timed_from + args.cell_seconds)
        elapsed_timed = time.monotonic() - timed_from if timed_from is not None else 0.0
        if worker.poll() is None:
            os.killpg(worker.pid, signal.SIGKILL)  # the server dies with it (parent-death signal)
            worker.wait()
        rows = [json.loads(line) for line in record.read_text().splitlines()] if record.exists() else []
    if loop is not None:
        loop.kill()
        loop.wait()
    timed = [row for row in rows if row["call"] > 0]
    if len(timed) == args.calls:
        per_call = sum(row["seconds"] for row in timed) / len(timed)
    else:  # out of time: the calls so far and the unfinished one, over the calls that finished (a lower bound)
        per_call = elapsed_timed / max(1, len(timed))
    return Cell(path, policy, threads, busy, per_call, len(timed), args.calls,
                timed[0]["tokens"] if timed else (rows[0]["tokens"] if rows else 0), load_start, os.getloadavg()[0],
                timed_from is not None)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--paths", default="server,in-process")
    parser.add_argument("--calls", type=int, default=3)
    parser.add_argument("--tokens", type=int, default=64)
    parser.add_argument("--cell-seconds", type=float, default=90.0)
    parser.add_argument("--worker", choices=("server", "in-process"), help=argparse.SUPPRESS)
    parser.add_argument("--policy", choices=POLICIES, help=argparse.SUPPRESS)
    parser.add_argument("--threads", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--record", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        calls = _server_calls if args.worker == "server" else _in_process_calls
        calls(args.threads, args.policy, args.tokens, args.calls, args.record)
        return
    print(f"cores usable: {len(os.sched_getaffinity(0))}; {args.calls} timed calls of {args.tokens} tokens per "
          f"cell, at most {args.cell_seconds:.0f} s; load = 1-minute load average at the cell's start / end (other "
          "processes share this machine: 'quiet' means no busy loop of ours)", flush=True)
    print("| path | wait policy | threads | next to | s per call | tokens | load start / end |")
    print("|---|---|---:|---|---:|---:|---|")
    cells = []
    for path in args.paths.split(","):
        for policy in POLICIES:
            for threads in (1, 2):
                for busy in (False, True):
                    cell = run_cell(path, policy, threads, busy, args)
                    cells.append(cell)
                    label = "default (before)" if policy == "before" else "passive (after)"
                    print(f"| {path} | {label} | {threads} | {'busy loop' if busy else 'quiet'} | {cell.seconds()} "
                          f"| {cell.tokens} | {cell.load_start:.2f} / {cell.load_end:.2f} |", flush=True)
    print("\nbusy / quiet per call, and 2 threads busy vs 1 thread busy (target: busy <= 1.5x quiet, 2 threads "
          "never slower than 1):")
    by = {(c.path, c.policy, c.threads, c.busy): c for c in cells}
    for path in args.paths.split(","):
        for policy in POLICIES:
            parts = []
            for threads in (1, 2):
                quiet, busy = by[(path, policy, threads, False)], by[(path, policy, threads, True)]
                if quiet.finished and busy.finished:
                    parts.append(f"{threads} thr {busy.per_call / quiet.per_call:.2f}x")
            two, one = by[(path, policy, 2, True)], by[(path, policy, 1, True)]
            if two.finished and one.finished:
                parts.append(f"2 thr / 1 thr busy {two.per_call / one.per_call:.2f}x")
            print(f"  {path}, {policy}: {'; '.join(parts) or 'not enough finished calls'}")


if __name__ == "__main__":
    main()
