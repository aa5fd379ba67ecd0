"""``medfuzz run`` at scale against the planted server with a fixed per-call latency (issue 21, item 3): wall
time, calls and tokens per model, peak memory of the ``medfuzz run`` process (Inspect runs in it), and log size,
for several item counts; then the per-1,000-items figures a user multiplies by an endpoint's latency and price.

Each size runs in a fresh folder with fresh caches (nothing is answered from a cache), as a subprocess
(``python -m medfuzz run ... --no-report``) so its peak RSS is its own (``RUSAGE_CHILDREN``; the planted server
runs in this process). Tokens are the planted server's word counts, not a real tokenizer's.

    PYTHONPATH=src python bench/suite_scale.py --data PATH/medqa_dev.jsonl --items 100,300,1272 \\
        --latency-ms 50 --methods baseline,tces,medguard --level paper
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

from medfuzz.models.planted.server import launch
from medfuzz.models.planted.spec import PlantedSpec


def folder_size(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())


def one(data: str, items: int, args: argparse.Namespace) -> dict[str, float]:
    spec = PlantedSpec.load().with_target(data=data)
    server = launch(spec, latency_ms=args.latency_ms)
    try:
        with tempfile.TemporaryDirectory() as tmp:
            out = Path(tmp) / "run"
            env = {**os.environ, **server.inspect_env(), "MEDFUZZ_CACHE": f"{tmp}/cache",
                   "INSPECT_CACHE_DIR": f"{tmp}/inspect-cache"}
            command = [sys.executable, "-m", "medfuzz", "run", "--model", server.inspect_model(),
                       "--attacker", server.inspect_model(attacker=True), "--data", data, "--limit", str(items),
                       "--methods", args.methods, "--level", args.level, "--no-report", "--out", str(out),
                       *(w for option in args.option for w in ("-T", option))]
            before = resource.getrusage(resource.RUSAGE_CHILDREN)
            start = time.perf_counter()
            done = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
            wall = time.perf_counter() - start
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
            if done.returncode != 0:
                raise SystemExit(f"medfuzz run failed ({done.returncode}):\n{done.stderr[-3000:]}")
            paid = re.search(r"([\d,]+) model calls paid now", done.stdout)
            return {
                "items": items, "wall_s": wall, "cpu_s": (after.ru_utime + after.ru_stime)
                - (before.ru_utime + before.ru_stime),
                "peak_mb": after.ru_maxrss / 1024, "log_mb": folder_size(out / "inspect") / 2**20,
                "target_calls": server.app.calls.get(server.target_name, 0),
                "attacker_calls": server.app.calls.get(server.attacker_name, 0),
                "tokens": sum(server.app.tokens.values()),
                "client_calls": int(paid.group(1).replace(",", "")) if paid else float("nan"),
            }
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
    args = parser.parse_args()
    rows = [one(args.data, int(n), args) for n in args.items.split(",")]
    print(f"medfuzz run --methods {args.methods} --level {args.level} {' '.join('-T ' + o for o in args.option)} "
          f"against the planted server, {args.latency_ms:g} ms per call\n")
    print("| items | wall s | client CPU s | peak RSS MB | log MB | target calls | attacker calls | tokens |")
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['items']:,} | {r['wall_s']:.0f} | {r['cpu_s']:.0f} | {r['peak_mb']:.0f} | {r['log_mb']:.1f} | "
              f"{r['target_calls']:,} | {r['attacker_calls']:,} | {r['tokens']:,} |")
    last = rows[-1]
    k = 1000 / last["items"]
    calls = last["target_calls"] + last["attacker_calls"]
    print(f"\nper 1,000 items (from the {last['items']:,}-item run): {calls * k:,.0f} calls, {last['tokens'] * k:,.0f} "
          f"tokens, {last['wall_s'] * k / 60:.1f} min wall at {args.latency_ms:g} ms per call, "
          f"{last['cpu_s'] * k:.0f} s client CPU ({last['cpu_s'] / max(1, calls) * 1000:.1f} ms per call)")


if __name__ == "__main__":
    main()
