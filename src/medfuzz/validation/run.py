"""``medfuzz validate``: every known-truth check at one size, the table, a JSON file and a calibration plot.

MedFuzz runs with its **default** significance test (the sequential policy: Besag-Clifford's h/l, M = 30,
alpha = 0.05) and, as a second row where the numbers differ, the fixed policy (all M controls, (b + 1)/(M + 1),
with the paper's b/M beside it). Two departures from the defaults keep the runs fast and do not touch the
test: p-hat from the letter alone (``pvalue_prompt="direct"``) over fewer option orders, and no in-context
exemplars. The default p-hat estimator itself (dialog prompt, 5 orders, exemplars; letter log-probabilities
present and absent) is checked on its own (``validation/phat.py``).

``ci`` runs in seconds (the test suite runs it, and the mutation test runs it once per planted defect);
``full`` takes minutes: about 5,000 tested null attacks under the default policy (its one-sided check tells
alpha = 0.05 from the paper's 2/31) and 2,300 under the fixed one, power under both policies and a power
curve over δ;
TCES on 150 items with an 800-name perturbation set and 2,000 simulated attacks per item and sampler.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from medfuzz.planted import PlantedSpec, PlantedTarget
from medfuzz.scorers.medfuzz import totals
from medfuzz.solvers.medfuzz.config import MedFuzzConfig
from medfuzz.validation import medfuzz as vm
from medfuzz.validation.checks import Check, Size, format_table, power_table, suite_errors
from medfuzz.validation.items import synthetic_items


@dataclass(frozen=True)
class Plan:
    items: int  # the δ run: accuracy, p-values and power with the default (sequential) policy
    fixed_items: int  # the first of those items again with the fixed policy (power; same attacks, same stream)
    null_items: int  # the null run with the default (sequential) policy
    fixed_null_items: int  # the first of those items again with the fixed policy (same attacks, same stream)
    option_orders: int
    curve: tuple[float, ...]
    curve_items: int
    mc: int
    # the fixed policy's statistical null checks: at ci no affordable n gives them power against their defects
    # (~700 tested attacks for 0.8 against the paper's 2/31), so ci keeps its exact checks and calibration rows
    fixed_calibration: bool = True


PLANS: dict[str, Plan] = {
    # ci: ~460 tested null attacks under the default test, so that its one-sided check fails a test at twice
    # its level with probability ~0.85 (docs/validation.md: power)
    "ci": Plan(items=40, fixed_items=0, null_items=200, fixed_null_items=30, option_orders=2, curve=(), curve_items=0,
               mc=4_000, fixed_calibration=False),
    # full: ~5,000 tested null attacks under the default test, so that its one-sided check (<= alpha at 99.9 %)
    # rejects the paper's 2/31 with probability ~0.9; ~2,300 under the fixed one (1/31 against 2/31: decisive)
    "full": Plan(items=100, fixed_items=100, null_items=2_200, fixed_null_items=1_000, option_orders=3,
                 curve=(0.0, 0.1, 0.2, 0.3, 0.4), curve_items=40, mc=20_000),
}
# items of the default p-hat estimator's checks (validation/phat.py: the dialog prompt, 5 orders, exemplars)
PHAT_ITEMS: dict[str, int] = {"ci": 60, "full": 200}
# the attacker of the δ run writes a malformed reply with this probability (the bundled spec: 0.1), so with the
# default 2 retries about 6 % of turns end in an LLM error: enough that the rule "LLM-error replicates are
# dropped" (post-attack accuracy) and its upper bound (errors counted correct) are told apart by the checks
DELTA_MALFORMED = 0.4
SEQUENTIAL, FIXED = "sequential (default)", "fixed"


class StopValidation(Exception):
    """``fail_fast``: a check just failed, so the run stops here (``Outcome.add``)."""


@dataclass
class Outcome:
    checks: list[Check] = field(default_factory=list)
    # null p-values by row ("sequential", "fixed", "paper") and the M they were drawn with
    null_pvalues: dict[str, list[float]] = field(default_factory=dict)
    controls: int = 30
    alpha: float = 0.05
    calibration: list[vm.Calibration] = field(default_factory=list)
    curve: dict[str, list[dict[str, float]]] = field(default_factory=dict)
    # ``--fail-fast``: stop at the first failing check (the run's verdict is then known: it fails) ...
    fail_fast: bool = False
    # ... and the section it stopped in, and the sections it skipped ("" and [] when every section ran)
    stopped_in: str = ""
    skipped: list[str] = field(default_factory=list)

    def add(self, checks: Iterable[Check]) -> None:
        """Record ``checks``; with ``fail_fast``, raise ``StopValidation`` as soon as one of them fails."""
        self.checks += checks
        if self.fail_fast and self.failed:
            raise StopValidation

    @property
    def failed(self) -> list[Check]:
        """Failed checks, and every check that cannot fail (an error of the suite, never excused)."""
        return [c for c in self.checks if not c.passed and (c.vacuous or not c.expect_fail)]


def medfuzz_config(plan: Plan, seed: int, policy: str = "sequential") -> MedFuzzConfig:
    # the default test (policy, M = 30, alpha, min_controls, control_batch); the direct p-hat prompt and
    # fewer option orders only make each p-hat cheaper, and exemplars=0 keeps prompts short
    return MedFuzzConfig(replicates=5, option_orders=plan.option_orders, pvalue_prompt="direct", exemplars=0,
                         seed=seed, controls_policy=policy)


def _run(items: list, spec: PlantedSpec, config: MedFuzzConfig) -> tuple[list, list, list[vm.Tested]]:
    results = vm.run_engine(items, spec, config)
    scores = vm.score(results, config)
    return results, scores, vm.tested_attacks(results, scores, config)


MEDFUZZ_PARTS = ("delta", "null")  # the δ run (at ci: ~2 s of CPU) and the null runs (~7 s), independent


def validate_medfuzz(size: Size = "ci", seed: int = 0, spec: PlantedSpec | None = None,
                     outcome: Outcome | None = None, parts: tuple[str, ...] = MEDFUZZ_PARTS) -> Outcome:
    """The MedFuzz checks of ``parts``, added to ``outcome`` (a new one by default); with ``outcome.fail_fast``
    the first failing group of checks raises ``StopValidation`` before the next (costlier) run."""
    plan = PLANS[size]
    spec = (spec or PlantedSpec.load()).with_target(data="none")
    outcome = outcome if outcome is not None else Outcome()
    seq_config, fixed_config = medfuzz_config(plan, seed), medfuzz_config(plan, seed, "fixed")
    outcome.controls, outcome.alpha = seq_config.controls, seq_config.alpha
    if "delta" in parts:
        _delta_run(plan, seed, spec, outcome, seq_config, fixed_config)
    if "null" in parts:
        _null_runs(plan, seed, spec, outcome, seq_config, fixed_config)
    return outcome


def _delta_run(plan: Plan, seed: int, spec: PlantedSpec, outcome: Outcome, seq_config: MedFuzzConfig,
               fixed_config: MedFuzzConfig) -> None:
    """The δ run: accuracy (read from totals), p-values recomputed, Holm/BH vectors, power; both policies."""
    delta_spec = spec.with_attacker(malformed_rate=DELTA_MALFORMED)
    label = f"delta={spec.target.delta}"
    items = synthetic_items(plan.items, seed=seed + 1)
    results, scores, seq_tested = _run(items, delta_spec, seq_config)
    outcome.add(vm.accuracy_checks(items, delta_spec, seq_config, results, scores))
    bases = list(PlantedTarget(delta_spec, items).base.values())  # the planted b_i, not engine output
    simulated = vm.simulate_pvalues(bases, delta_spec, seq_config, plan.mc, seed=spec.seed + 1)
    outcome.add(vm.recompute_checks(f"{label}, {SEQUENTIAL}", seq_tested, scores, seq_config))
    outcome.add([vm.power_check(f"{label}, {SEQUENTIAL}", simulated["sequential"], scores, seq_config)])
    reported = [t.p_value for t in seq_tested if t.p_value is not None]
    outcome.add(vm.adjustment_checks(f"{label}, {SEQUENTIAL}: ", reported, note="the run's tested p-values"))
    if plan.fixed_items:  # the fixed policy's power (at ci its p-values are checked on the null run only)
        _, fixed_scores, fixed_tested = _run(items[:plan.fixed_items], delta_spec, fixed_config)
        outcome.add(vm.recompute_checks(f"{label}, {FIXED}", fixed_tested, fixed_scores, fixed_config))
        fixed_bases = list(PlantedTarget(delta_spec, items[:plan.fixed_items]).base.values())
        fixed_sim = vm.simulate_pvalues(fixed_bases, delta_spec, fixed_config, plan.mc, seed=spec.seed + 1)
        outcome.add([vm.power_check(f"{label}, {FIXED}", fixed_sim["fixed"], fixed_scores, fixed_config)])
        outcome.add(vm.stream_checks(label, seq_tested, fixed_tested, seq_config))


def _null_runs(plan: Plan, seed: int, spec: PlantedSpec, outcome: Outcome, seq_config: MedFuzzConfig,
               fixed_config: MedFuzzConfig) -> None:
    """The null: calibration of the default test (one-sided, <= alpha), of the fixed one and of the paper's b/M;
    at full size the power curve over δ."""
    null = spec.with_target(delta=0.0)
    null_items = synthetic_items(plan.null_items, seed=seed + 2)
    _, scores, seq_null = _run(null_items, null, seq_config)
    outcome.add(vm.recompute_checks(f"null, {SEQUENTIAL}", seq_null, scores, seq_config))
    checks, rows = vm.null_checks(f"null, {SEQUENTIAL}", seq_null, scores, seq_config)
    outcome.calibration += rows
    outcome.add(checks)
    _, scores, fixed_null = _run(null_items[:plan.fixed_null_items], null, fixed_config)
    outcome.add(vm.recompute_checks(f"null, {FIXED}", fixed_null, scores, fixed_config))
    checks, rows = vm.null_checks(f"null, {FIXED}", fixed_null, scores, fixed_config, plan.fixed_calibration)
    outcome.calibration += rows
    outcome.add(checks)
    outcome.add(vm.stream_checks("null", seq_null, fixed_null, seq_config))
    outcome.null_pvalues = {
        "sequential": [t.p_value for t in seq_null if t.p_value is not None],
        "fixed": [t.p_value for t in fixed_null if t.p_value is not None],
        "paper": [t.p_value_paper for t in fixed_null if t.p_value_paper is not None],
    }

    for delta in plan.curve:
        curve_spec = spec.with_target(delta=delta)
        curve_items = synthetic_items(plan.curve_items, seed=seed + 3)
        bases = list(PlantedTarget(curve_spec, curve_items).base.values())
        simulated = vm.simulate_pvalues(bases, curve_spec, seq_config, plan.mc, seed=seed + 4)
        for policy, config in (("sequential", seq_config), ("fixed", fixed_config)):
            _, scores, _ = _run(curve_items, curve_spec, config)
            pooled = totals([s.value for s in scores], config.turns)
            n, hits = int(pooled["tested"]), int(pooled["significant"])
            outcome.curve.setdefault(policy, []).append({
                "delta": delta, "planted": float(np.mean(simulated[policy] <= config.alpha * (1 + 1e-9))),
                "measured": hits / n if n else math.nan, "n": n})


_ROWS = (("sequential", "sequential h/l (default)", "o"), ("fixed", "fixed (b+1)/(M+1)", "x"),
         ("paper", "fixed b/M (paper)", "s"))


def plot(outcome: Outcome, path: Path) -> Path:
    """Left: the null p-values' CDF against the exact null CDF of each rule; right: power against δ."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    alpha, m = outcome.alpha, outcome.controls
    fig, (qq, power) = plt.subplots(1, 2, figsize=(11, 4.5))
    for key, label, marker in _ROWS:
        values = np.asarray(outcome.null_pvalues.get(key, []))
        if not len(values):
            continue
        # at each attainable value x: the measured share of p <= x (markers) and the exact share (line); a valid
        # p-value stays on or below the diagonal
        dist = vm.null_distribution(m, alpha, key)
        grid = np.array(sorted(dist))
        exact = np.cumsum([dist[x] for x in grid])
        line = qq.plot(grid, exact, "-", lw=0.8, drawstyle="steps-post")[0]
        qq.plot(grid, [(values <= x + 1e-9).mean() for x in grid], marker, ms=6 if key == "sequential" else 4,
                color=line.get_color(), zorder=3 if key == "sequential" else 2,
                label=f"{label}, M={m}, n={len(values)}")
    qq.plot([0, 1], [0, 1], "k--", lw=1)
    qq.axhline(alpha, color="grey", lw=0.8, ls=":")
    qq.axvline(alpha, color="grey", lw=0.8, ls=":")
    qq.set(xlabel="x", ylabel="share of null p-values ≤ x", xlim=(-0.02, 1.02), ylim=(-0.02, 1.02),
           title="Null model (δ = 0): p-value CDF (line: exact, markers: measured)")
    qq.legend(fontsize=8)
    for policy, rows in sorted(outcome.curve.items()):
        deltas = [r["delta"] for r in rows]
        line = power.plot(deltas, [r["planted"] for r in rows], "-", label=f"planted (Monte Carlo), {policy}")[0]
        measured = np.array([r["measured"] for r in rows])
        n = np.array([max(1, r["n"]) for r in rows])
        err = 1.96 * np.sqrt(measured * (1 - measured) / n)
        power.errorbar(deltas, measured, yerr=err, fmt="o", color=line.get_color(), capsize=3,
                       label=f"measured by medfuzz, {policy}")
    power.axhline(alpha, color="grey", lw=0.8, ls=":")
    power.set(xlabel="planted δ (mass moved by a trigger)", ylabel=f"share of tested attacks significant at {alpha}",
              title=f"Power of the permutation test, M = {m}", ylim=(0, 1.02))
    if outcome.curve:
        power.legend(fontsize=8)
    else:
        power.text(0.5, 0.5, "power curve: medfuzz validate --size full", ha="center", transform=power.transAxes)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def calibration_table(rows: list[vm.Calibration]) -> str:
    lines = [f"{'null calibration (MedFuzz)':<32} {'significant':>11} {'n':>6} {'share':>7} {'95% CI':>17} "
             f"{'exact':>7}"]
    for r in rows:
        low, high = r.interval()
        lines.append(f"{r.label:<32} {r.hits:>11} {r.n:>6} {r.share:>7.4f} {f'[{low:.4f}, {high:.4f}]':>17} "
                     f"{r.exact:>7.4f}")
    return "\n".join(lines)


def write(outcome: Outcome, out: Path, size: str, seed: int) -> dict[str, Path]:
    """validation.json, and the calibration plot where there is something to plot."""
    out.mkdir(parents=True, exist_ok=True)
    data: dict[str, Any] = {"size": size, "seed": seed, "checks": [c.to_dict() for c in outcome.checks],
                            "calibration": [r.to_dict() for r in outcome.calibration],
                            "null_pvalues": outcome.null_pvalues, "controls": outcome.controls,
                            "power_curve": outcome.curve, "failed": len(outcome.failed),
                            "fail_fast": {"stopped_in": outcome.stopped_in, "not_run": outcome.skipped},
                            "suite_errors": [c.statistic for c in suite_errors(outcome.checks)]}
    json_path = out / "validation.json"
    json_path.write_text(json.dumps(data, indent=2, default=float))
    if not outcome.null_pvalues and not outcome.curve:  # --fail-fast stopped before the null runs: no plot
        return {"json": json_path}
    return {"json": json_path, "plot": plot(outcome, out / "calibration.png")}


def validate(size: Size = "ci", seed: int = 0, spec: PlantedSpec | None = None,
             fail_fast: bool = False) -> Outcome:
    """Every section's checks. With ``fail_fast`` the sections run cheapest first (CPU at ci: the exact checks
    0.4 s, p-hat 0.3 s, MedGuard 1.1 s, the MedFuzz δ run 2 s, TCES 5 s, the MedFuzz null runs 7 s) and the run
    stops at the first failing check: a defect that the cheap sections catch costs little, and no check is left
    out of a run that passes (its verdict needs every check). The surfaces section runs part by part
    (``surfaces.PARTS``, cheapest first under ``fail_fast``), so it too stops after the failing part."""
    from medfuzz.validation import surfaces
    from medfuzz.validation.exact import exact_checks
    from medfuzz.validation.medguard import validate_medguard
    from medfuzz.validation.phat import phat_checks
    from medfuzz.validation.tces import validate_tces

    config = medfuzz_config(PLANS[size], seed)
    outcome = Outcome(controls=config.controls, alpha=config.alpha, fail_fast=fail_fast)
    sections: dict[str, Callable[[], object]] = {  # the table's order
        "MedFuzz δ run": lambda: validate_medfuzz(size, seed, spec, outcome, ("delta",)),
        "MedFuzz null runs": lambda: validate_medfuzz(size, seed, spec, outcome, ("null",)),
        "p-hat": lambda: outcome.add(phat_checks(PHAT_ITEMS[size], seed, spec)),
        "TCES": lambda: outcome.add(validate_tces(size, seed, spec)),
        "MedGuard": lambda: outcome.add(validate_medguard(n=100, seed=seed)),
        "exact": lambda: outcome.add(exact_checks(outcome.alpha)),
        "surfaces": lambda: _surfaces(surfaces.surface_parts(size, seed, spec), outcome,
                                      surfaces.CHEAPEST_FIRST if fail_fast else surfaces.PARTS),
    }
    order = list(sections)
    if fail_fast:  # cheapest first (seconds of CPU at ci, measured: docs/performance.md)
        order = ["exact", "p-hat", "MedGuard", "MedFuzz δ run", "TCES", "MedFuzz null runs", "surfaces"]
    for i, name in enumerate(order):
        try:
            sections[name]()
        except StopValidation:
            outcome.stopped_in, outcome.skipped = name, order[i + 1:]
            break
    return outcome


def _surfaces(parts: dict[str, Callable[[], list[Check]]], outcome: Outcome, order: Iterable[str]) -> None:
    """The surfaces section part by part, so that ``--fail-fast`` stops after the part whose check failed (each
    part runs harness tasks: seconds to half a minute of CPU)."""
    for name in order:
        outcome.add(parts[name]())


def main(size: Size, out: Path, seed: int = 0, spec: str | None = None, fail_fast: bool = False) -> int:
    outcome = validate(size, seed, PlantedSpec.load(spec) if spec else None, fail_fast=fail_fast)
    print(format_table(outcome.checks))
    print()
    print(calibration_table(outcome.calibration))
    print()
    print(power_table(outcome.checks))
    written = write(outcome, out, size, seed)
    failed = outcome.failed
    vacuous = suite_errors(outcome.checks)
    known = [c for c in outcome.checks if c.expect_fail and not c.passed and not c.vacuous]
    print(f"\n{len(outcome.checks) - len(failed) - len(known)}/{len(outcome.checks)} checks pass"
          + (f"; {len(known)} known gaps (xfail)" if known else "")
          + (f"; FAILED: {', '.join(c.statistic for c in failed if not c.vacuous)}"
             if any(not c.vacuous for c in failed) else ""))
    if vacuous:
        print(f"\nERROR in the validation suite: {len(vacuous)} check(s) cannot fail, their interval covers the "
              "statistic's whole range (too few units at this size, or a badly built interval); fix the suite:")
        for c in vacuous:
            print(f"  - {c.method}: {c.statistic}: [{c.low:.4g}, {c.high:.4g}] covers [{c.lowest:.4g}, "
                  f"{c.highest:.4g}] (n={c.n})")
    if outcome.stopped_in:
        print(f"\nstopped at the first failing check (--fail-fast), in the {outcome.stopped_in} checks"
              + (f"; not run: {', '.join(outcome.skipped)}" if outcome.skipped else ""))
    for kind, path in written.items():
        print(f"wrote {kind}: {path}")
    if "plot" not in written:
        print("no calibration plot: the run stopped before the MedFuzz null runs")
    return 1 if failed else 0


__all__ = ["PLANS", "Outcome", "main", "plot", "validate", "write"]
