"""``medfuzz run --shard K/N`` end to end: a suite run whole and the same suite as shards, each through the real
command against the planted server with the call cache off (every call reaches the server, so a sample whose
calls depended on its position in the run would answer differently); the shards merged by the report equal the
whole run metric by metric and sample by sample."""

from __future__ import annotations

import csv
import json
import math
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from medfuzz.planted.server import PlantedServer, launch
from medfuzz.planted.spec import PlantedSpec

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).parents[2]


@pytest.fixture(scope="module")
def server() -> Iterator[PlantedServer]:
    # a wide planted TCES radius: random substitutes win often enough that the comparison is not of zeros
    running = launch(PlantedSpec.load().with_target(data="demo").with_tces(radius=0.9))
    yield running
    running.stop()


def _run(server: PlantedServer, out: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, **server.inspect_env(), "MEDFUZZ_CALL_CACHE": "off",
           "MEDFUZZ_CACHE": str(out.parent / "cache"), "INSPECT_CACHE_DIR": str(out.parent / "inspect-cache")}
    done = subprocess.run([sys.executable, "-m", "medfuzz", "run", "--model", server.inspect_model(),
                           "--attacker", server.inspect_model(attacker=True), "--data", "demo", "--level", "quick",
                           "--limit", "5", "-T", "medguard_limit_per_aspect=1",
                           "-T", "medfuzz_controls=30", "--out", str(out), *extra],
                          env=env, capture_output=True, text=True, timeout=1200, cwd=ROOT)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return done


def _by_label(logs: list) -> dict:
    return {log.eval.metadata["medfuzz_suite"]: log for log in logs}


def _metrics(log) -> dict[str, float]:
    return {f"{s.name}/{name}": m.value for s in log.results.scores for name, m in s.metrics.items()}


def _same(a: float, b: float) -> bool:
    return (math.isnan(a) and math.isnan(b)) or a == pytest.approx(b, rel=1e-12, abs=1e-12)


def test_shards_merged_by_the_report_equal_the_whole_run(server: PlantedServer, tmp_path: Path) -> None:
    from inspect_ai.log import list_eval_logs, read_eval_log

    from medfuzz.report import collect_logs
    from medfuzz.report.log_reader import read_once
    from medfuzz.report.shards import merge_shards

    _run(server, tmp_path / "whole", "--no-report")
    for k in (1, 2, 3):
        done = _run(server, tmp_path / f"shard{k}", "--shard", f"{k}/3", "--no-report")
        settings = json.loads((tmp_path / f"shard{k}" / "run.json").read_text())
        assert settings["shard"] == f"{k}/3"
        # the bound printed before the first call is the shard's own
        assert "medfuzz" in settings["max_calls"]["per_run"], done.stdout
    whole = _by_label([read_eval_log(i) for i in list_eval_logs(str(tmp_path / "whole" / "inspect"))])
    shard_paths = collect_logs([tmp_path / f"shard{k}" / "inspect" for k in (1, 2, 3)])
    with read_once():
        merged_paths = [p for p in merge_shards(shard_paths, tmp_path / "merged") if p.suffix == ".eval"]
    merged = _by_label([read_eval_log(str(p)) for p in merged_paths])  # as written: what Inspect View reads
    assert sorted(merged) == sorted(whole) and len(merged_paths) == len(whole)
    # not a vacuous comparison: attacks succeeded and some were significant (at M = 30 controls)
    assert _metrics(whole["medfuzz"])["medfuzz_scorer/medfuzz_significant"] > 0
    assert _metrics(whole["tces drugs rands"])["tces_scorer/tces_asr"] > 0
    for label, one in whole.items():
        joined = merged[label]
        assert joined.status == "success", (label, joined.error)
        assert joined.eval.dataset.samples == one.eval.dataset.samples
        assert sorted(map(str, joined.eval.dataset.sample_ids)) == sorted(map(str, one.eval.dataset.sample_ids))
        # every sample's scores, then every metric Inspect recomputed from them
        by_id = {(s.id, s.epoch): s for s in one.samples}
        assert sorted(by_id) == sorted((s.id, s.epoch) for s in joined.samples)
        for sample in joined.samples:  # values and records (TCES: every query's substitution and answer)
            alone = by_id[(sample.id, sample.epoch)]
            assert {n: (s.value, s.metadata) for n, s in sample.scores.items()} == {
                n: (s.value, s.metadata) for n, s in alone.scores.items()}, (label, sample.id)
        ours, theirs = _metrics(joined), _metrics(one)
        assert sorted(ours) == sorted(theirs), label
        different = {name: (ours[name], theirs[name]) for name in ours if not _same(ours[name], theirs[name])}
        assert not different, (label, different)
        # the run-start records are the whole run's (a shard's are for its slice)
        for key in ("max_calls", "attainability"):
            assert joined.eval.metadata.get(key) == one.eval.metadata.get(key), (label, key)
        # tokens summed over the shards equal the whole run's (the call cache was off: same calls)
        usage = lambda log: {m: u.total_tokens for m, u in log.stats.model_usage.items()}  # noqa: E731
        assert usage(joined) == usage(one), label
        assert [e.shard for e in joined.eval.shards.ledger] == ["1", "2", "3"]
    # the report's machine-readable summary, from the shards, is the whole run's
    reports = {}
    for name, folders in (("whole", ["whole"]), ("shards", ["shard1", "shard2", "shard3"])):
        done = subprocess.run([sys.executable, "-m", "medfuzz", "report",
                               *[str(tmp_path / f / "inspect") for f in folders], "--out", str(tmp_path / f"r-{name}")],
                              capture_output=True, text=True, timeout=600, cwd=ROOT)
        assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
        summary = json.loads((tmp_path / f"r-{name}" / "summary.json").read_text())
        for results in summary["models"].values():
            for result in results["results"]:
                result.pop("sources")  # the log files read: the whole run's, or the merged logs
        reports[name] = summary
    assert reports["shards"] == reports["whole"] and reports["whole"]["models"]
    # medfuzz compare merges the same way: the per-model rows from the shards are the whole run's
    rows = {}
    for name, folders in (("whole", ["whole"]), ("shards", ["shard1", "shard2", "shard3"])):
        done = subprocess.run([sys.executable, "-m", "medfuzz", "compare",
                               *[str(tmp_path / f / "inspect") for f in folders], "--out", str(tmp_path / f"c-{name}")],
                              capture_output=True, text=True, timeout=600, cwd=ROOT)
        assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
        with (tmp_path / f"c-{name}" / "attack_comparison_models.csv").open() as handle:
            rows[name] = [{k: v for k, v in row.items() if k != "source"} for row in csv.DictReader(handle)]
    assert rows["shards"] == rows["whole"] and {r["method"] for r in rows["whole"]} == {"medfuzz", "tces"}
