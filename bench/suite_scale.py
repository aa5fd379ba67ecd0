"""``medfuzz run`` at scale against the planted server with a fixed per-call latency (issue 21, item 3): wall
time, calls and tokens per model, peak memory of the ``medfuzz run`` process (Inspect runs in it), and log size,
for several item counts; then the per-1,000-items figures a user multiplies by an endpoint's latency and price.

Each size runs in a fresh folder with fresh caches (nothing is answered from a cache), as a subprocess
(``python -m medfuzz run ... --no-report``) so its peak RSS is its own (``RUSAGE_CHILDREN``; the planted server
runs in this process). Tokens are the planted server's word counts, not a real tokenizer's.

    PYTHONPATH=src python bench/suite_scale.py --data PATH/medqa_dev.jsonl --items 100,300,1272 \\
        --latency-ms 50 --methods baseline,tces,medguard --level paper

``--shards N`` runs each size as N ``medfuzz run --shard K/N`` processes at once against the one server (the
path past one client process, docs/performance.md P8), then ``medfuzz report`` over the N folders, which merges
the shards into one run per method: its wall time and peak RSS are the merge's cost at that size. Peak RSS is
then the largest of the shard processes'; client CPU is their sum.
"""

from __future__ import annotations

import argparse
import os
import re
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from medfuzz.planted.server import launch
from medfuzz.planted.spec import PlantedSpec


def folder_size(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())


# runs a command and prints its own peak RSS (KB) last on stderr: RUSAGE_CHILDREN in the caller is a maximum over
# every child it ever waited for, so each command is measured by a wrapper of its own
_MEASURED = ("import resource, subprocess, sys; r = subprocess.run(sys.argv[1:]); "
             "print('MAXRSS_KB', resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, file=sys.stderr); "
             "sys.exit(r.returncode)")


def _peak_mb(stderr: str) -> float:
    found = re.findall(r"MAXRSS_KB (\d+)", stderr)
    return int(found[-1]) / 1024 if found else float("nan")


def one(data: str, items: int, args: argparse.Namespace) -> dict[str, float]:
    spec = PlantedSpec.load().with_target(data=data)
    server = launch(spec, latency_ms=args.latency_ms)
    try:
        with tempfile.TemporaryDirectory() as scratch:
            tmp = str(Path(args.keep) / f"items-{items}") if args.keep else scratch  # --keep: logs stay there
            Path(tmp).mkdir(parents=True, exist_ok=True)
            out = Path(tmp) / "run"
            env = {**os.environ, **server.inspect_env(), "MEDFUZZ_CACHE": f"{tmp}/cache",
                   "INSPECT_CACHE_DIR": f"{tmp}/inspect-cache"}
            shards = args.shards
            commands = []
            for k in range(1, shards + 1):
                folder = out if shards == 1 else Path(tmp) / f"run-{k}"
                commands.append([sys.executable, "-c", _MEASURED, sys.executable, "-m", "medfuzz", "run",
                                 "--model", server.inspect_model(), "--attacker", server.inspect_model(attacker=True),
                                 "--data", data, "--limit", str(items), "--methods", args.methods, "--level",
                                 args.level, "--no-report", "--out", str(folder),
                                 *(["--shard", f"{k}/{shards}"] if shards > 1 else []),
                                 *(w for option in args.option for w in ("-T", option))])
            before = resource.getrusage(resource.RUSAGE_CHILDREN)
            start = time.perf_counter()
            running = [subprocess.Popen(c, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                       for c in commands]
            outputs = [(p.communicate(), p.returncode) for p in running]
            wall = time.perf_counter() - start
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
            for (stdout, stderr), code in outputs:
                if code != 0:
                    raise SystemExit(f"medfuzz run failed ({code}):\n{stdout[-2000:]}\n{stderr[-3000:]}")
            paid = [re.search(r"([\d,]+) model calls paid now", stdout) for (stdout, _), _ in outputs]
            folders = [out] if shards == 1 else [Path(tmp) / f"run-{k}" for k in range(1, shards + 1)]
            row = {
                "items": items, "wall_s": wall, "cpu_s": (after.ru_utime + after.ru_stime)
                - (before.ru_utime + before.ru_stime),
                "peak_mb": max(_peak_mb(stderr) for (_, stderr), _ in outputs),
                "log_mb": sum(folder_size(f / "inspect") for f in folders) / 2**20,
                "target_calls": server.app.calls.get(server.target_name, 0),
                "attacker_calls": server.app.calls.get(server.attacker_name, 0),
                "tokens": sum(server.app.tokens.values()),
                "client_calls": sum(int(m.group(1).replace(",", "")) for m in paid if m) if all(paid)
                else float("nan"),
            }
            if shards > 1 or args.report:
                start = time.perf_counter()
                report = subprocess.run([sys.executable, "-c", _MEASURED, sys.executable, "-m", "medfuzz", "report",
                                         *(str(f / "inspect") for f in folders), "--out", f"{tmp}/report"],
                                        env=env, capture_output=True, text=True, check=False)
                if report.returncode != 0:
                    raise SystemExit(f"medfuzz report failed:\n{report.stderr[-3000:]}")
                row["report_s"] = time.perf_counter() - start
                row["report_peak_mb"] = _peak_mb(report.stderr)
            return row
    finally:
        server.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", required=True, help="a MedQA file (release or HF layout) with enough items")
    parser.add_argument("--items", default="100,300", help="comma-separated item counts")
    parser.add_argument("--latency-ms", type=float, default=50.0)
    parser.add_argument("--methods", default="baseline,tces,medguard")
    parser.add_argument("--level", default="paper")
    parser.add_argument("--option", "-T", action="append", default=[], metavar="NAME=VALUE")
    parser.add_argument("--shards", type=int, default=1, help="medfuzz run --shard K/N processes at once per size")
    parser.add_argument("--report", action="store_true", help="also time medfuzz report (always with --shards)")
    parser.add_argument("--keep", default=None, help="keep each size's logs under this folder (default: deleted)")
    args = parser.parse_args()
    rows = [one(args.data, int(n), args) for n in args.items.split(",")]
    print(f"medfuzz run --methods {args.methods} --level {args.level} {' '.join('-T ' + o for o in args.option)} "
          f"against the planted server, {args.latency_ms:g} ms per call"
          + (f", as {args.shards} shards at once" if args.shards > 1 else "") + "\n")
    print("| items | wall s | client CPU s | peak RSS MB | log MB | target calls | attacker calls | tokens |")
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['items']:,} | {r['wall_s']:.0f} | {r['cpu_s']:.0f} | {r['peak_mb']:.0f} | {r['log_mb']:.1f} | "
              f"{r['target_calls']:,} | {r['attacker_calls']:,} | {r['tokens']:,} |")
    if any("report_s" in r for r in rows):
        print("\n| items | medfuzz report s (merging the shards) | report peak RSS MB |\n|---|---|---|")
        for r in rows:
            nan = float("nan")
            print(f"| {r['items']:,} | {r.get('report_s', nan):.0f} | {r.get('report_peak_mb', nan):.0f} |")
    last = rows[-1]
    k = 1000 / last["items"]
    calls = last["target_calls"] + last["attacker_calls"]
    print(f"\nper 1,000 items (from the {last['items']:,}-item run): {calls * k:,.0f} calls, {last['tokens'] * k:,.0f} "
          f"tokens, {last['wall_s'] * k / 60:.1f} min wall at {args.latency_ms:g} ms per call, "
          f"{last['cpu_s'] * k:.0f} s client CPU ({last['cpu_s'] / max(1, calls) * 1000:.1f} ms per call)")


if __name__ == "__main__":
    main()
