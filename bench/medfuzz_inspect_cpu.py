"""Where a MedFuzz model call's client CPU goes through Inspect (issue 21, item 3): a benchmark, not a test.

Runs ``medfuzz_medqa`` with ``inspect_ai.eval`` in this process (``display="none"``, fresh Inspect and medfuzz
caches: nothing is answered from a cache) against the planted server with a fixed per-call latency in its own
process (its CPU is not counted), under cProfile, and prints per variant: model calls (the server's count),
wall time, client CPU per call (``time.process_time`` around ``eval``, profiler off and on) and the share of the
profiled CPU by component.

The partition uses each function's own time (tottime), so the shares sum to 100 %. A function of the standard
library or a builtin (``copy.deepcopy``, ``re``, ``dict.get``, ...) is no component of its own: its own time is
charged to whoever called it, walking up the profile's caller edges (each caller's share of the callee's own
time, as cProfile records it per edge) to the first function that belongs to a component. Serialisation
(pydantic, pydantic_core, json) and the asyncio event loop keep their own rows: who asked for them is in the
``--top`` list.

Variants (``--variants``, comma-separated; each runs once, back to back in this process, same seed and items):

- ``default``: the task as a user runs it;
- ``no_samples``: ``log_samples=False`` (the log keeps no samples: ``medfuzz report`` cannot read it);
- ``no_realtime``: ``log_realtime=False`` (the log is written at the end only; no live ``inspect view``);
- ``no_model_api``: ``log_model_api=False`` (explicit; Inspect's default already omits the raw API payloads);
- ``cache_off``: ``MEDFUZZ_CALL_CACHE=off`` (no Inspect call cache: no key hashing, no cache files);
- ``merge_config``: the adapter's per-call ``GenerateConfig`` built as before the cut (``GenerateConfig.merge``
  once or twice per call, each a deep copy) instead of ``call_config``'s one constructor.

The bench also times the adapter's config building alone, before and after the cut (``timeit``, same process).

Against Inspect's own floor, in the same run (issue 28): variants that run no medfuzz code on the call path,
back to back with medfuzz's in every round, same process, same planted server and latency:

- ``bare``: the model calls of the round's first measured ``default`` (MedFuzz) run replayed through Inspect's
  ``Model.generate`` (same models, same input messages, same ``GenerateConfig`` as Inspect logged them, same
  task config; as many in flight as ``max_connections``); Inspect's default: no cache;
- ``bare_cache``: the same replay with the ``CachePolicy`` every MedFuzz call carries (medfuzz turns Inspect's
  call cache on so that a resumed run pays no completed call twice);
- ``clean``: ``medfuzz/medqa_clean`` (one call per sample, ``--clean-items`` items x ``--epochs``, the generate
  config ``medfuzz run`` gives the baselines), against ``bare_one``: the same samples through Inspect's own
  ``multiple_choice()`` and ``choice()`` only, same task config.

``--realtime off`` runs every variant as ``medfuzz run`` does (no realtime sample buffer); the default keeps
Inspect's default (on) in every variant; ``log_samples`` is on in all (Inspect's and ``medfuzz run``'s default).
The ratio table divides per round and the medians; the per-run table gives the 1-minute load average before and
after each run and the CPU the cyclic garbage collector took. Inspect's per-eval lookup of a registered task's
distribution (``cache_distribution_scan``) is paid once per process unless ``--rescan-distributions``.
Measured (one run, 2 shared cores): docs/performance.md, "P7b".

    PYTHONPATH=src python bench/medfuzz_inspect_cpu.py [--items 6] [--latency-ms 50] [--max-connections 16]
        [--turns 5] [--replicates 5] [--controls 30] [--option-orders 5] [--variants default,no_realtime] [--top 30]
    PYTHONPATH=src python bench/medfuzz_inspect_cpu.py --items 3 --realtime off --repeat 3 --no-profile \
        --variants default,bare,bare_cache,cache_off,clean,bare_one
"""

from __future__ import annotations

import argparse
import cProfile
import json
import os
import pstats
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable
from typing import Any

# suite.LEVELS["demo"].generate, written out: importing the suite module here would time its imports too
LEVEL_GENERATE = {"max_tokens": 32, "seed": 0, "temperature": 0.0}

# the planted server in a child process: its request handling is not the client's CPU
SERVER_CODE = """
import json, sys
from medfuzz.planted.server import launch
server = launch(latency_ms=float(sys.argv[1]))
print(json.dumps({"env": server.inspect_env(), "target": server.inspect_model(),
                  "attacker": server.inspect_model(attacker=True)}), flush=True)
for _ in sys.stdin:  # each line from the bench: the calls so far; its stdin closed: stop
    print(json.dumps(dict(server.app.calls)), flush=True)
server.stop()
"""

# (component, test on the path of the function's file), first match wins; "~" paths are builtins (below)
COMPONENTS: list[tuple[str, Callable[[str], bool]]] = [
    ("medfuzz engine", lambda p: "/medfuzz/solvers/" in p or "/medfuzz/scorers/" in p),
    ("medfuzz adapter", lambda p: "/medfuzz/adapters/" in p or "/medfuzz/models/" in p),
    ("medfuzz Inspect shell + rest", lambda p: "/medfuzz/" in p),
    ("Inspect cache", lambda p: "/inspect_ai/model/_cache" in p),
    ("Inspect event/transcript/log", lambda p: any(s in p for s in (
        "/inspect_ai/log/", "/inspect_ai/event/", "/inspect_ai/_util/json", "/inspect_ai/_eval/task/log",
        "/inspect_ai/util/_store", "/inspect_ai/_util/content", "/inspect_ai/solver/_task_state",
        "/inspect_ai/_util/working", "/inspect_ai/_display/", "/inspect_ai/_util/trace",
        "/inspect_ai/_eval/task/transcript", "/inspect_ai/_util/registry", "/inspect_ai/_util/hash"))),
    ("Inspect provider (openai-api)", lambda p: "/inspect_ai/model/_providers/" in p
     or "/inspect_ai/model/_openai" in p),
    ("Inspect model API / generate", lambda p: "/inspect_ai/model/" in p),
    ("Inspect eval loop + other", lambda p: "/inspect_ai/" in p),
    ("OpenAI SDK + httpx", lambda p: any(s in p for s in ("/openai/", "/httpx/", "/httpx2/", "/httpcore/",
                                                          "/httpcore2/", "/h11/", "/anyio/", "/sniffio/",
                                                          "/certifi/", "/idna/"))),
    ("serialisation (pydantic, json)", lambda p: any(s in p for s in ("/pydantic/", "/pydantic_core/",
                                                                      "/json/", "/jsonpatch", "/jsonpointer"))),
    ("asyncio event loop", lambda p: any(s in p for s in ("/asyncio/", "selectors.py", "/ssl.py", "/socket.py",
                                                         "/nest_asyncio"))),
]
NEUTRAL = "(stdlib/builtin: charged to caller)"


def component(func: tuple[str, int, str]) -> str:
    path, _, name = func
    if path == "~":  # a builtin: its name says whose it is when it is an extension's method
        if "pydantic_core" in name or "_json" in name or "json" in name.lower():
            return "serialisation (pydantic, json)"
        if "select" in name or "epoll" in name or "_asyncio" in name:
            return "asyncio event loop"
        return NEUTRAL
    for label, test in COMPONENTS:
        if test(path):
            return label
    if "/site-packages/" not in path:  # the standard library (copy, re, typing, dataclasses, ...)
        return NEUTRAL
    return "other third-party"


def partition(stats: pstats.Stats) -> dict[str, float]:
    """Own time per component; neutral functions' own time walked up to their callers (see the docstring)."""
    raw: dict[Any, Any] = stats.stats  # type: ignore[attr-defined]
    memo: dict[Any, dict[str, float]] = {}
    busy: set[Any] = set()

    def where(func: Any) -> dict[str, float]:
        """How a function's own time splits over components (memoised: the caller graph is a DAG but wide)."""
        label = component(func)
        if label != NEUTRAL:
            return {label: 1.0}
        if func in memo:
            return memo[func]
        if func in busy or func not in raw:  # recursion in the standard library: no component to charge
            return {"other": 1.0}
        busy.add(func)
        callers = raw[func][4]
        # each edge's own time when called from that caller; edges without any: their cumulative time
        weights = {c: e[2] for c, e in callers.items()}
        if sum(weights.values()) <= 0:
            weights = {c: e[3] for c, e in callers.items()}
        total = sum(weights.values())
        split: dict[str, float] = defaultdict(float)
        if total <= 0:
            split["other"] = 1.0
        else:
            for caller, weight in weights.items():
                for label, part in where(caller).items():
                    split[label] += part * weight / total
        busy.discard(func)
        memo[func] = dict(split)
        return memo[func]

    share: dict[str, float] = defaultdict(float)
    for func, (_, _, tottime, _, _) in raw.items():
        for label, part in where(func).items():
            share[label] += tottime * part
    return dict(share)


class Server:
    """The planted server in a child process, one for the whole bench (Inspect keeps a model per name and base URL
    for the process, so every variant must talk to the same server)."""

    def __init__(self, latency_ms: float) -> None:
        self.process = subprocess.Popen([sys.executable, "-c", SERVER_CODE, str(latency_ms)], stdin=subprocess.PIPE,
                                        stdout=subprocess.PIPE, text=True)
        assert self.process.stdout is not None and self.process.stdin is not None
        self.stdin, self.stdout = self.process.stdin, self.process.stdout
        self.info = json.loads(self.stdout.readline())

    def calls(self) -> int:
        self.stdin.write("\n")
        self.stdin.flush()
        return sum(json.loads(self.stdout.readline()).values())

    def stop(self) -> None:
        self.stdin.close()
        self.process.wait(timeout=30)


def merged_config(model: Any, max_tokens: int, temperature: float | None, seed: int | None,
                  logprobs: bool) -> Any:
    """The adapter's per-call config as it was built before ``call_config`` (for the before/after rows)."""
    from inspect_ai.model import GenerateConfig
    from inspect_ai.model._generate_config import active_generate_config

    from medfuzz.adapters.inspect_model import ATTEMPT_TIMEOUT
    from medfuzz.models.openai_compat import TOP_LOGPROBS

    config = GenerateConfig(max_tokens=max_tokens, temperature=temperature, seed=seed)
    if model.config.attempt_timeout is None and active_generate_config().attempt_timeout is None:
        config = config.merge(GenerateConfig(attempt_timeout=ATTEMPT_TIMEOUT))
    if logprobs:
        config = config.merge(GenerateConfig(logprobs=True, top_logprobs=TOP_LOGPROBS))
    return config


def config_timing() -> tuple[float, float]:
    """Microseconds per call to build the adapter's config with logprobs (a p-hat call), before and after."""
    import timeit

    from inspect_ai.model import get_model

    from medfuzz.adapters import inspect_model

    model = get_model("mockllm/model")
    assert merged_config(model, 8, 1.0, 7, True) == inspect_model.call_config(model, 8, 1.0, 7, True)
    n = 5000
    before = timeit.timeit(lambda: merged_config(model, 8, 1.0, 7, True), number=n) / n * 1e6
    after = timeit.timeit(lambda: inspect_model.call_config(model, 8, 1.0, 7, True), number=n) / n * 1e6
    return before, after


# the Inspect-only floors (no medfuzz code on the call path): see the docstring's "Against Inspect's floor"
BARE = {"bare", "bare_cache"}
ONE_CALL = {"clean", "bare_one"}


def recorded_calls(log: Any) -> list[list[tuple[str, list[Any], Any]]]:
    """Per sample, the model calls a finished MedFuzz log made, in order: (model, input messages, config)."""
    from inspect_ai.log._condense import resolve_sample_attachments  # the log keeps long texts as attachments

    calls = []
    for sample in log.samples or []:
        sample = resolve_sample_attachments(sample, "full")
        calls.append([(e.model, list(e.input), e.config) for e in sample.events if e.event == "model"])
    return calls


def bare_task(args: argparse.Namespace, cache: bool, warmup: bool) -> Any:
    """A task whose solver only calls Inspect's ``Model.generate``: it replays the model calls of the MedFuzz run
    before it in the same round (same models, same input messages, same ``GenerateConfig`` as Inspect logged
    them), per MedFuzz sample one bare sample, each with enough workers that the bare run keeps as many calls
    in flight as ``max_connections`` allows. ``cache``: Inspect's ``CachePolicy`` with medfuzz's expiry (what
    every MedFuzz call carries) instead of Inspect's default, no cache. No scorer."""
    import asyncio

    from inspect_ai import Task
    from inspect_ai.dataset import Sample
    from inspect_ai.model import CachePolicy, get_model
    from inspect_ai.solver import Generate, TaskState, solver

    from medfuzz.adapters.inspect_model import default_generate_config

    recorded = args.recorded[:1] if warmup else args.recorded
    if warmup:
        recorded = [recorded[0][:4]]
    policy = CachePolicy(expiry="1W", per_epoch=True) if cache else False
    workers = max(1, -(-args.max_connections // len(recorded)))  # ceil: all samples together fill the connections

    @solver
    def replay() -> Any:
        async def solve(state: TaskState, generate: Generate) -> TaskState:
            queue = list(reversed(recorded[int(state.sample_id) - 1]))  # type: ignore[arg-type]

            async def worker() -> None:
                while queue:
                    model, messages, config = queue.pop()
                    state.output = await get_model(model).generate(messages, config=config, cache=policy)

            await asyncio.gather(*(worker() for _ in range(workers)))
            return state

        return solve

    return Task(dataset=[Sample(id=i + 1, input="replay") for i in range(len(recorded))], solver=replay(),
                config=default_generate_config())  # MedFuzz's task config


def one_call_task(name: str, args: argparse.Namespace, warmup: bool) -> Any:
    """``clean``: ``medfuzz/medqa_clean`` as ``medfuzz run`` runs it; ``bare_one``: the same samples (same
    prompts) through Inspect's own ``multiple_choice()`` solver (one ``generate()``) and ``choice()`` scorer,
    with the same task config: the one-call-per-sample floor."""
    from inspect_ai import Task
    from inspect_ai.scorer import choice
    from inspect_ai.solver import multiple_choice

    from medfuzz.adapters.inspect_model import default_generate_config
    from medfuzz.tasks.inspect.baselines import medqa_clean

    task = medqa_clean(data="demo", limit=1 if warmup else args.clean_items)
    if name == "clean":
        return task
    return Task(dataset=task.dataset, solver=multiple_choice(), scorer=choice(), config=default_generate_config())


class GcClock:
    """CPU seconds the cyclic garbage collector spent while in the ``with`` block (``gc.callbacks``): its cost grows
    with the objects alive, which the profile charges to whatever function was running when it struck."""

    def __init__(self) -> None:
        self.seconds = 0.0
        self.by_generation = [[0, 0.0], [0, 0.0], [0, 0.0]]  # [collections, seconds] per generation
        self._started = 0.0

    def _callback(self, phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            self._started = time.process_time()
        else:
            took = time.process_time() - self._started
            self.seconds += took
            self.by_generation[info["generation"]][0] += 1
            self.by_generation[info["generation"]][1] += took

    def __enter__(self) -> GcClock:
        import gc

        gc.callbacks.append(self._callback)
        return self

    def __exit__(self, *exc: object) -> None:
        import gc

        gc.callbacks.remove(self._callback)


def run_variant(variant: str, args: argparse.Namespace, server: Server, warmup: bool = False) -> dict[str, Any]:
    """One eval of the variant ``variant``; ``warmup``: a one-item, one-turn run that pays the imports and Inspect's
    first-run set-up (pydantic schemas, registry, YAML packs) so that the measured runs count per-call cost.
    ``NAME+freeze``: the variant NAME with ``gc.freeze()`` just before the eval and ``gc.unfreeze()`` after it
    (what is alive before the eval starts is left out of the collections during it)."""
    import gc

    from inspect_ai import eval as inspect_eval

    from medfuzz.tasks.inspect.medfuzz import medfuzz_medqa

    name, freeze = variant.removesuffix("+freeze"), variant.endswith("+freeze")
    info = server.info
    calls_before = server.calls()
    options: dict[str, Any] = {}
    if name == "no_samples":
        options["log_samples"] = False
    elif name == "no_realtime":
        options["log_realtime"] = False
    elif name == "no_model_api":
        options["log_model_api"] = False
    saved = dict(os.environ)
    from medfuzz.adapters import inspect_model

    cut = inspect_model.call_config
    if name == "merge_config":
        inspect_model.call_config = merged_config  # type: ignore[assignment]
    try:
        with tempfile.TemporaryDirectory() as tmp:
            os.environ.update(info["env"])
            os.environ.update({"MEDFUZZ_CACHE": f"{tmp}/cache", "INSPECT_CACHE_DIR": f"{tmp}/inspect-cache"})
            if name == "cache_off":
                os.environ["MEDFUZZ_CALL_CACHE"] = "off"
            size = (dict(limit=1, turns=1, replicates=1, controls=0) if warmup else
                    dict(limit=args.items, turns=args.turns, replicates=args.replicates, controls=args.controls))
            if name in BARE:
                task = bare_task(args, name == "bare_cache", warmup)
            elif name in ONE_CALL:
                task = one_call_task(name, args, warmup)
                options.update(LEVEL_GENERATE)  # what medfuzz run gives its baseline runs (suite.LEVELS)
                if not warmup:
                    options["epochs"] = args.epochs
            else:
                task = medfuzz_medqa(data="demo", option_orders=args.option_orders, exemplars=0,
                                     pvalue_prompt="direct", **size)
            if args.realtime == "off" and "log_realtime" not in options:
                options["log_realtime"] = False
            load = os.getloadavg()[0]
            profile = cProfile.Profile() if args.profile and not warmup else None
            gc_clock = GcClock()
            if freeze:
                gc.collect()
                gc.freeze()
            cpu, start = time.process_time(), time.perf_counter()
            if profile:
                profile.enable()
            with gc_clock:
                logs = inspect_eval(task, model=info["target"], model_roles={"attacker": info["attacker"]},
                                    display="none", log_dir=f"{tmp}/logs", max_connections=args.max_connections,
                                    **options)
            if profile:
                profile.disable()
            wall, cpu = time.perf_counter() - start, time.process_time() - cpu
            if freeze:
                gc.unfreeze()
            log_bytes = sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(f"{tmp}/logs") for f in fs)
            status = logs[0].status
            scores = [next(iter(s.scores.values())).value for s in (logs[0].samples or []) if s.scores]
            samples = len(logs[0].samples or [])
            if name == "default" and (warmup or not args.recorded_measured):  # the bare variants replay these
                args.recorded, args.recorded_measured = recorded_calls(logs[0]), not warmup
    finally:
        os.environ.clear()
        os.environ.update(saved)
        inspect_model.call_config = cut  # type: ignore[assignment]
    if status != "success":
        raise SystemExit(f"variant {variant}: eval ended {status}: {str(logs[0].error)[:2000]}")
    return {"name": variant, "calls": server.calls() - calls_before, "wall": wall, "cpu": cpu,
            "log_kb": log_bytes / 1024, "profile": profile, "scores": scores, "samples": samples,
            "load": (load, os.getloadavg()[0]),
            "gc": gc_clock.seconds, "gc_generations": gc_clock.by_generation}


# (ours, Inspect's floor): MedFuzz against bare generate() calls, the clean baseline against Inspect's own MCQ
PAIRS = [("default", "bare"), ("default", "bare_cache"), ("cache_off", "bare"), ("no_realtime", "bare"),
         ("clean", "bare_one"), ("default+freeze", "bare+freeze"), ("default+freeze", "bare_cache+freeze"),
         ("default+freeze", "default"), ("bare+freeze", "bare")]


def print_ratios(runs: list[dict[str, Any]], names: list[str]) -> None:
    """Ours / floor per call, round by round (each round's two runs back to back) and of the medians."""
    pairs = [(a, b) for a, b in PAIRS if a in names and b in names]
    if not pairs:
        return
    print("\n| ours / Inspect floor | per round | median ours / median floor |")
    print("|---|---|---|")
    for ours, floor in pairs:
        a = [r["cpu"] / max(1, r["calls"]) for r in runs if r["name"] == ours]
        b = [r["cpu"] / max(1, r["calls"]) for r in runs if r["name"] == floor]
        ratio = sorted(a)[len(a) // 2] / sorted(b)[len(b) // 2]
        print(f"| {ours} / {floor} | {', '.join(f'{x / y:.3f}' for x, y in zip(a, b, strict=True))} | "
              f"{ratio:.3f} |")
    if "clean" in names and "bare_one" in names:
        per_sample = {n: sorted(r["cpu"] / max(1, r["samples"]) * 1000 for r in runs if r["name"] == n)
                      for n in ("clean", "bare_one")}
        medians = {n: v[len(v) // 2] for n, v in per_sample.items()}
        print(f"\none-call samples, CPU ms per sample (median): clean {medians['clean']:.2f}, bare_one "
              f"{medians['bare_one']:.2f}: ours adds {medians['clean'] - medians['bare_one']:.2f} ms per sample")


def cache_distribution_scan() -> None:
    """Inspect looks up the installed distribution of a registered task at every eval (for the log's revision);
    when its fast path misses, as for a worktree or ``src/`` on ``PYTHONPATH`` next to the venv's editable
    install, it rescans every installed distribution's file list (``importlib.metadata.packages_distributions``:
    130-220 ms per eval here). That is a per-eval constant of a development set-up, not per-call or per-sample
    cost, and the bare tasks (not registered) never pay it: the bench pays the scan once per process."""
    import functools

    from inspect_ai._util import package

    package.packages_distributions = functools.cache(package.packages_distributions)  # type: ignore[attr-defined]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--items", type=int, default=6)
    parser.add_argument("--latency-ms", type=float, default=50.0)
    parser.add_argument("--max-connections", type=int, default=16)
    parser.add_argument("--turns", type=int, default=5)
    parser.add_argument("--replicates", type=int, default=5)
    parser.add_argument("--controls", type=int, default=30)
    parser.add_argument("--option-orders", type=int, default=5)
    parser.add_argument("--variants", default="default")
    parser.add_argument("--clean-items", type=int, default=50, help="clean/bare_one: demo items (at most 50)")
    parser.add_argument("--epochs", type=int, default=4, help="clean/bare_one: epochs (one call per sample each)")
    parser.add_argument("--realtime", choices=("inspect", "off"), default="inspect",
                        help="Inspect's realtime sample buffer in every variant: Inspect's default (on) or off "
                             "(what medfuzz run uses)")
    parser.add_argument("--no-profile", dest="profile", action="store_false",
                        help="CPU per call without cProfile's overhead (no split)")
    parser.add_argument("--repeat", type=int, default=1, help="rounds over the variants (median per variant)")
    parser.add_argument("--rescan-distributions", action="store_true",
                        help="leave Inspect's per-eval distribution scan uncached (see cache_distribution_scan)")
    parser.add_argument("--dump", default=None, metavar="PREFIX",
                        help="write each variant's profile to PREFIX<variant>.prof (for pstats / snakeviz)")
    parser.add_argument("--top", type=int, default=0, help="also print the top N functions by own time")
    args = parser.parse_args()
    from medfuzz.stats import adjust

    if not args.rescan_distributions:
        cache_distribution_scan()
    adjust([0.01, 0.2], "holm")  # the metrics' first adjustment imports statsmodels: set-up, not per call
    server = Server(args.latency_ms)
    names = args.variants.split(",")
    bases = [n.removesuffix("+freeze") for n in names]
    if BARE & set(bases) and ("default" not in bases or min(i for i, n in enumerate(bases) if n in BARE) <
                              bases.index("default")):
        parser.error("bare and bare_cache replay the MedFuzz run's calls: list default before them")
    try:
        args.recorded, args.recorded_measured = [], False
        # every kind of task's first-run set-up, unmeasured
        for name in dict.fromkeys(["default", *(n.removesuffix("+freeze") for n in names)]):
            run_variant(name, args, server, warmup=True)
        # round-robin (A B C A B C ...): a slow spell of the shared machine hits every variant alike
        runs = []
        for _ in range(args.repeat):
            for name in names:
                runs.append(run_variant(name, args, server))
    finally:
        server.stop()
    print(f"medfuzz_medqa via inspect_ai.eval: demo, {args.items} items, K={args.turns}, {args.replicates} "
          f"replicates, M={args.controls}, {args.option_orders} option orders, direct p-hat, exemplars 0; "
          f"planted server in its own process, {args.latency_ms:g} ms per call, max_connections "
          f"{args.max_connections}; cProfile {'on' if args.profile else 'off'}; {args.repeat} round(s); realtime "
          f"buffer {'Inspect default (on)' if args.realtime == 'inspect' else 'off (as medfuzz run)'}; "
          f"log_samples on (Inspect's default and medfuzz run's)")
    if {n.removesuffix("+freeze") for n in names} & (BARE | ONE_CALL):
        print(f"bare/bare_cache: the first measured MedFuzz run's {sum(map(len, args.recorded)):,} model calls "
              f"replayed through Model.generate; clean/bare_one: {args.clean_items} demo items x {args.epochs} "
              f"epochs, one call per sample; Inspect's distribution scan "
              f"{'per eval' if args.rescan_distributions else 'once per process'}")
    print(f"1-minute load average at start: {os.getloadavg()[0]:.2f} (2 cores)\n")
    print("| variant | round | calls | samples | wall s | client CPU s | CPU ms / call | of it GC ms / call | log KB "
          "| load start/end | same scores as first |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for i, r in enumerate(runs):
        first = next(x for x in runs if x["name"] == r["name"])
        same = "n/a (no scores)" if not r["scores"] else str(r["scores"] == first["scores"])
        print(f"| {r['name']} | {i // len(names) + 1} | {r['calls']:,} | {r['samples']:,} | {r['wall']:.1f} | "
              f"{r['cpu']:.1f} | {r['cpu'] / max(1, r['calls']) * 1000:.2f} | "
              f"{r['gc'] / max(1, r['calls']) * 1000:.2f} | {r['log_kb']:.0f} | "
              f"{r['load'][0]:.1f}/{r['load'][1]:.1f} | {same} |")
    rows = []
    for name in names:
        mine = [r for r in runs if r["name"] == name]
        per_call = sorted(r["cpu"] / max(1, r["calls"]) * 1000 for r in mine)
        profile = None
        if args.profile:
            profile = pstats.Stats(mine[0]["profile"])
            for r in mine[1:]:
                profile.add(r["profile"])
        rows.append({"name": name, "calls": sum(r["calls"] for r in mine), "profile": profile,
                     "median": per_call[len(per_call) // 2], "runs": per_call})
    print("\n| variant | round | GC collections gen 0 / 1 / 2 | GC s gen 0 / 1 / 2 |")
    print("|---|---|---|---|")
    for i, r in enumerate(runs):
        gens = r["gc_generations"]
        print(f"| {r['name']} | {i // len(names) + 1} | {' / '.join(str(g[0]) for g in gens)} | "
              f"{' / '.join(f'{g[1]:.2f}' for g in gens)} |")
    print("\n| variant | CPU ms / call, median of rounds | rounds |")
    print("|---|---|---|")
    for r in rows:
        print(f"| {r['name']} | {r['median']:.2f} | {', '.join(f'{x:.2f}' for x in r['runs'])} |")
    print_ratios(runs, names)
    before, after = config_timing()
    print(f"\nadapter's per-call GenerateConfig (with logprobs): {before:.0f} µs before the cut (merge), "
          f"{after:.0f} µs after (one constructor), timeit in this process")
    if not args.profile:
        return
    if args.dump:
        for r in rows:
            r["profile"].dump_stats(f"{args.dump}{r['name']}.prof")
    shares = [partition(r["profile"]) for r in rows]
    labels = [label for label, _ in COMPONENTS] + ["other third-party", "other"]
    print("\nShare of profiled client CPU (own time; stdlib/builtins charged to their caller; all rounds pooled), "
          "profiled ms per call in ()\n")
    print("| component | " + " | ".join(r["name"] for r in rows) + " |")
    print("|---|" + "---|" * len(rows))
    for label in labels:
        cells = []
        for r, share in zip(rows, shares, strict=True):
            total, own = sum(share.values()) or 1.0, share.get(label, 0.0)
            cells.append(f"{own / total * 100:.1f} % ({own / r['calls'] * 1000:.2f})")
        print(f"| {label} | " + " | ".join(cells) + " |")
    print("| total profiled | " + " | ".join(f"100 % ({sum(sh.values()) / r['calls'] * 1000:.2f})"
                                            for r, sh in zip(rows, shares, strict=True)) + " |")
    if args.top:
        for r in rows:
            print(f"\n--- {r['name']}: top {args.top} by own time")
            r["profile"].stream = sys.stdout
            r["profile"].sort_stats("tottime").print_stats(args.top)


if __name__ == "__main__":
    main()
