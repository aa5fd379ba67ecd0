"""Issue 34: every number a user reads is computed once. The main command's shape (``medfuzz run`` with every method,
both harnesses, on the planted models) prints its summary, writes the page, ``summary.json`` and the model card;
all four hold the same value, interval ends and n for every number (``tests/surfaces.py``).

The planted target is set up so that a second estimator would show a different number: rates at 0 and at 1 (a
binomial SE prints "± 0.000" where the Wilson interval is wide), an lm-eval rate over a subset of its docs (TCES's
flip rate over the items answered correctly clean: items 10 and 11 are planted wrong, so its n is not the task's
docs, and its standard error, NaN before, is sqrt(r (1 - r) / (n - 1))), and MedGuard aspects of unequal sizes
(the index is the unweighted mean of the aspects, not the pooled share of units)."""

from __future__ import annotations

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
from tests.surfaces import assert_no_absolute_path, assert_surfaces_agree, terminal_results

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).parents[2]
# answered wrongly clean (p = 0.02); every other item p = 0.95, so the planted attacker has items to attack
WRONG = {"medqa-dev-00010", "medqa-dev-00011"}


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, str, str, PlantedServer]]:
    folder = tmp_path_factory.mktemp("surfaces")
    table = folder / "accuracy.jsonl"
    table.write_text("".join(json.dumps({"id": f"medqa-dev-{i:05d}", "p": 0.02 if f"medqa-dev-{i:05d}" in WRONG
                                         else 0.95}) + "\n" for i in range(1, 51)))
    server = launch(PlantedSpec.load().with_target(data="demo", accuracy=str(table), low=0.01, high=0.99))
    try:
        model = server.inspect_model()
        env = {**os.environ, **server.inspect_env(), "HF_HUB_OFFLINE": "1", "MEDFUZZ_CACHE": str(folder / "cache"),
               "INSPECT_CACHE_DIR": str(folder / "inspect-cache")}
        lm_eval = (f"local-completions:model=planted,base_url={server.base_url}/completions,tokenizer_backend=remote,"
                   "num_concurrent=8")
        out = folder / "suite"
        # TCES on 5 items in both halves (``-T`` wins over --limit): lm-eval's single-substitution task counts
        # attackable docs, and its first 5 hold the two planted wrong
        command = [sys.executable, "-m", "medfuzz", "run", "--model", model, "--data", "demo", "--level", "quick",
                   "--limit", "3", "-T", "tces_limit=5", "--lm-eval", lm_eval,
                   "--attacker", server.inspect_model(attacker=True), "--no-preflight", "--out", str(out)]
        done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=1500, cwd=ROOT)
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
        yield out, done.stdout, model, server
    finally:
        server.stop()


def test_the_terminal_the_page_summary_json_and_the_model_card_agree(run) -> None:
    out, stdout, model, _ = run
    report = out / "report"
    # every number, on every surface, field by field: value, interval ends, k, n, SE
    assert assert_surfaces_agree(report, stdout, models=[model]) >= 25
    assert_no_absolute_path(report, [out, out.parent])
    # one model: one model-index block, read by Hugging Face's parser as that model, on the demo rows it used
    from huggingface_hub import ModelCard

    card = ModelCard("---\n" + (report / "model-index.yaml").read_text(encoding="utf-8") + "---\n").data
    assert card.model_name == model
    assert {r.dataset_type for r in card.eval_results} == {"medfuzz:medqa-demo", "medfuzz:medguard-bundled"}
    assert {r.dataset_split for r in card.eval_results if r.dataset_type == "medfuzz:medqa-demo"} == {"dev"}


def test_rates_at_0_and_1_carry_their_wilson_interval_everywhere(run) -> None:
    out, stdout, model, _ = run
    summary = json.loads((out / "report" / "summary.json").read_text(encoding="utf-8"))
    ends = [(r["title"], n) for r in summary["models"][model]["results"] if r["harness"] == "Inspect"
            for n in r["numbers"].values() if "ci95" in n and n["n"] and n["k"] in (0, n["n"])]
    assert ends, "the planted design has no rate at 0 or 1"
    terminal = terminal_results(stdout)
    for title, number in ends:
        low, high = number["ci95"]
        assert high - low > 0.3  # n <= 6 here: Wilson is wide where a binomial SE is 0
        assert (low == 0.0) == (number["k"] == 0) and (high == 1.0) == (number["k"] == number["n"])
        assert "±" not in terminal[("Inspect", title)][number["label"]]


def test_lm_eval_flip_rate_is_a_rate_over_its_own_docs_with_a_standard_error(run) -> None:
    out, _, model, _ = run
    [results_file] = (out / "lm-eval").rglob("results_*.json")
    data = json.loads(results_file.read_text())
    tces = data["results"]["tces_medqa_drugs"]
    [samples] = results_file.parent.glob(f"samples_tces_medqa_drugs_{results_file.stem.removeprefix('results_')}*")
    docs = [json.loads(line) for line in samples.read_text().splitlines() if line.strip()]
    flips = [d["flip_rate"] for d in docs if "flip_rate" in d]
    assert {d["doc"]["id"] for d in docs if "flip_rate" not in d} == WRONG & {d["doc"]["id"] for d in docs}
    assert 2 <= len(flips) < len(docs)  # a rate over a subset of the docs
    r, n = sum(flips) / len(flips), len(flips)
    assert tces["flip_rate,none"] == pytest.approx(r)
    assert tces["flip_rate_stderr,none"] == pytest.approx(math.sqrt(r * (1 - r) / (n - 1)))  # by hand
    summary = json.loads((out / "report" / "summary.json").read_text(encoding="utf-8"))
    [lm] = [x for x in summary["models"][model]["results"] if x["task"] == "tces_medqa_drugs"]
    assert lm["numbers"]["flip_rate"]["n"] == n and lm["numbers"]["flip_rate"]["se"] == pytest.approx(
        tces["flip_rate_stderr,none"])
    assert lm["data"]["docs"] == len(docs) != n
    # every robustness rate of every medfuzz lm-eval task (n >= 2 here) has a finite standard error (llm_errors is
    # an exact count of the run: it has none by design)
    rates = ("clean_acc", "attacked_acc", "flip_rate", "llm_error_rate")
    checked = [(task, metric, values[f"{metric}_stderr,none"]) for task, values in data["results"].items()
               if task.startswith(("tces_", "medfuzz_")) for metric in rates if f"{metric},none" in values]
    assert len(checked) >= 7
    for task, metric, stderr in checked:
        assert isinstance(stderr, float) and math.isfinite(stderr), (task, metric, stderr)


def test_medguard_overall_is_the_mean_of_its_aspects_as_inspect_logged_them(run) -> None:
    out, _, model, _ = run
    from inspect_ai.log import read_eval_log

    [path] = [p for p in (out / "inspect").glob("*.eval") if "medguard" in p.name]
    metrics = {k: m.value for s in read_eval_log(str(path), header_only=True).results.scores
               for k, m in s.metrics.items()}
    aspects = [v for k, v in metrics.items() if k.startswith("medguard_") and f"{k}_chance" in metrics]
    summary = json.loads((out / "report" / "summary.json").read_text(encoding="utf-8"))
    [inspect] = [r for r in summary["models"][model]["results"] if r["method"] == "medguard"
                 and r["harness"] == "Inspect"]
    overall = inspect["numbers"]["medguard_overall"]
    assert overall["value"] == pytest.approx(sum(aspects) / len(aspects)) == pytest.approx(metrics["medguard_overall"])
    assert overall["se"] == pytest.approx(metrics["medguard_overall_se"])
    # lm-eval's MedGuard docs are read by the same estimator, once: no second overall with lm-eval's own SE
    lm = [r for r in summary["models"][model]["results"] if r["method"] == "medguard" and r["harness"] == "lm-eval"]
    assert len(lm) == 1 and "medguard_overall" in lm[0]["numbers"]
