"""Holm's adjustment per call (issue 28, item 2): statsmodels' ``multipletests(method="holm")`` (before; it ends
with ``gc.collect()``) against ``stats.holm_step_down`` (after; the same numpy steps without it), in one run, in a
process that has imported Inspect (a MedFuzz run's metrics are computed in such a process: a full collection
walks all of its objects). Prints milliseconds per call for several family sizes; not a test.

    PYTHONPATH=src python bench/stats_holm.py [--calls 30]
"""

from __future__ import annotations

import argparse
import os
import time
from collections.abc import Callable

import numpy as np
from statsmodels.stats.multitest import multipletests

from medfuzz.stats import holm_step_down


def per_call_ms(function: Callable[[np.ndarray], object], values: np.ndarray, calls: int) -> float:
    started = time.perf_counter()
    for _ in range(calls):
        function(values)
    return (time.perf_counter() - started) / calls * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--calls", type=int, default=30)
    args = parser.parse_args()
    import inspect_ai  # the objects a run's process holds
    import inspect_ai.model  # noqa: F401

    rng = np.random.default_rng(0)
    print(f"load (1-minute) {os.getloadavg()[0]:.2f}; {args.calls} calls per cell")
    print("| family size | statsmodels multipletests (ms/call) | holm_step_down (ms/call) | same values |")
    print("|---:|---:|---:|---|")
    for size in (10, 100, 1000):
        values = rng.random(size)
        before = per_call_ms(lambda p: multipletests(p, method="holm"), values, args.calls)
        after = per_call_ms(holm_step_down, values, args.calls)
        same = np.array_equal(multipletests(values, method="holm")[1], holm_step_down(values))
        print(f"| {size} | {before:.2f} | {after:.3f} | {same} |", flush=True)


if __name__ == "__main__":
    main()
