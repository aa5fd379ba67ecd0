"""The n beside an lm-eval number: a metric lm-eval aggregates with ``nanmean`` is a rate over a subset of the
task's docs (TCES's flip rate over the clean-correct ones, MedFuzz's accuracies over the scored pairs), so its n
is counted from the per-doc values of the samples file, not taken from the task's doc count."""

from __future__ import annotations

import json
import math
from pathlib import Path

from medfuzz.report.runs import lm_eval_metric_counts

STAMP = "2026-02-03T04-05-06.123456"
DATA = {"configs": {"tces_medqa_drugs": {"metric_list": [{"metric": "clean_acc", "aggregation": "mean"},
                                                         {"metric": "flip_rate", "aggregation": "nanmean"}]}},
        "n-samples": {"tces_medqa_drugs": {"original": 6, "effective": 6}}}


def _results(folder: Path, samples: list[dict] | None) -> Path:
    results = folder / f"results_{STAMP}.json"
    results.write_text(json.dumps(DATA))
    if samples is not None:
        (folder / f"samples_tces_medqa_drugs_{STAMP}.jsonl").write_text(
            "".join(json.dumps(s) + "\n" for s in samples))
    return results


def test_a_nanmean_rate_counts_only_its_denominator(tmp_path: Path) -> None:
    nan = math.nan
    flips = [0.0, 1.0, nan, nan, 0.0, nan]  # 3 clean-correct docs of 6
    samples = [{"doc_id": i, "filter": "none", "clean_acc": float(not math.isnan(f)), "flip_rate": f}
               for i, f in enumerate(flips)]
    samples.append({"doc_id": 0, "filter": "other", "clean_acc": 1.0, "flip_rate": 1.0})  # another filter's record
    assert lm_eval_metric_counts(_results(tmp_path, samples), DATA, "tces_medqa_drugs") == {
        "clean_acc": 6, "flip_rate": 3}


def test_without_samples_a_mean_has_the_doc_count_and_a_nanmean_none(tmp_path: Path) -> None:
    assert lm_eval_metric_counts(_results(tmp_path, None), DATA, "tces_medqa_drugs") == {
        "clean_acc": 6, "flip_rate": None}


def test_a_samples_file_of_another_run_is_not_read(tmp_path: Path) -> None:
    results = _results(tmp_path, None)
    (tmp_path / "samples_tces_medqa_drugs_2026-01-01T00-00-00.000000.jsonl").write_text(
        json.dumps({"doc_id": 0, "clean_acc": 1.0, "flip_rate": 1.0}) + "\n")
    assert lm_eval_metric_counts(results, DATA, "tces_medqa_drugs") == {"clean_acc": 6, "flip_rate": None}


def test_an_unreadable_samples_file_leaves_the_counts_unknown(tmp_path: Path) -> None:
    results = _results(tmp_path, None)
    (tmp_path / f"samples_tces_medqa_drugs_{STAMP}.jsonl").write_text('{"doc_id": 0, "flip_rate": 1.0}\n{cut off')
    assert lm_eval_metric_counts(results, DATA, "tces_medqa_drugs") == {"clean_acc": 6, "flip_rate": None}


# task version 5 on: a rate over a subset is returned only by the docs in its denominator, aggregated by ``mean``,
# and its metric_list entry names the denominator
SUBSET = {"configs": {"tces_medqa_drugs": {"metric_list": [
    {"metric": "clean_acc", "aggregation": "mean"},
    {"metric": "flip_rate", "aggregation": "mean", "denominator": "docs answered correctly clean"}]}},
    "n-samples": {"tces_medqa_drugs": {"original": 6, "effective": 6}}}


def test_a_rate_returned_only_by_its_denominator_counts_those_docs(tmp_path: Path) -> None:
    flips = [0.0, 1.0, None, None, 0.0, None]  # 3 clean-correct docs of 6; the others carry no flip_rate
    samples = [{"doc_id": i, "filter": "none", "clean_acc": float(f is not None),
                **({"flip_rate": f} if f is not None else {})} for i, f in enumerate(flips)]
    results = tmp_path / f"results_{STAMP}.json"
    results.write_text(json.dumps(SUBSET))
    (tmp_path / f"samples_tces_medqa_drugs_{STAMP}.jsonl").write_text("".join(json.dumps(s) + "\n" for s in samples))
    assert lm_eval_metric_counts(results, SUBSET, "tces_medqa_drugs") == {"clean_acc": 6, "flip_rate": 3}
    # without the samples file a `mean` over a named denominator is unknown, never the task's 6 docs
    (tmp_path / f"samples_tces_medqa_drugs_{STAMP}.jsonl").unlink()
    assert lm_eval_metric_counts(results, SUBSET, "tces_medqa_drugs") == {"clean_acc": 6, "flip_rate": None}
