"""``medfuzz compare`` (MedFuzz part) and the expert-review round trip on small real runs: two planted targets
through Inspect's own eval loop (one always flipped by a trigger sentence, one never), and lm-eval's
``medfuzz_medqa`` evaluating the first one's log with each planted target in-process (transfer)."""

from __future__ import annotations

import csv
import dataclasses
import json
import math
from pathlib import Path

import pytest

from medfuzz.errors import DataError
from medfuzz.report import compare as attack_compare
from medfuzz.report.review import QUESTIONS, import_reviews, read_sheet, write_sheet

VULNERABLE, ROBUST = 6, 7  # items per run: the robust run has one item the vulnerable run lacks


def _spec(name: str, delta: float):
    """Always right on clean items; a trigger sentence moves all (delta 1) or none (delta 0) of the key's mass
    to a distractor; the attacker puts a trigger in every modified item."""
    from medfuzz.planted import PlantedSpec

    spec = PlantedSpec.load().with_attacker(trigger_rate=1.0, malformed_rate=0.0).with_target(
        accuracy="constant", constant=1.0, low=1.0, high=1.0, noise=0.0, delta=delta)
    return dataclasses.replace(spec, name=name)


def _inspect_run(spec, limit: int, log_dir: Path) -> Path:
    from inspect_ai import eval as inspect_eval
    from inspect_ai.model import get_model

    from medfuzz.planted.server import API_KEY, launch
    from medfuzz.tasks.inspect.medfuzz import medfuzz_medqa

    server = launch(spec)
    try:
        # explicit base URLs (not the environment), so two planted servers can serve in one process
        target, attacker = (get_model(server.inspect_model(attacker=a), base_url=server.base_url, api_key=API_KEY,
                                      memoize=False) for a in (False, True))
        task = medfuzz_medqa(data="demo", limit=limit, turns=1, replicates=1, controls=2, exemplars=0,
                             option_orders=1)
        [log] = inspect_eval(task, model=target, model_roles={"attacker": attacker}, log_dir=str(log_dir),
                             display="none")
    finally:
        server.stop()
    assert log.status == "success", log.error
    return Path(log.location)


def _lm_eval_transfer(spec, fuzzed: Path, out: Path) -> None:
    """lm-eval's ``medfuzz_medqa`` on the fuzzed log with the planted target in-process, saved the way the
    lm-eval CLI saves it (results_*.json + samples_*.jsonl)."""
    from lm_eval import simple_evaluate
    from lm_eval.api.model import LM
    from lm_eval.loggers import EvaluationTracker
    from lm_eval.tasks import TaskManager

    from medfuzz.benchmarks import load_items
    from medfuzz.planted import PlantedTarget
    from medfuzz.planted.scoring import continuation_logprob
    from medfuzz.tasks import LM_EVAL_TASKS_PATH

    target = PlantedTarget(spec, load_items("medqa", "demo"))

    class PlantedLM(LM):
        def loglikelihood(self, requests, disable_tqdm: bool = False):
            return [continuation_logprob(target, *r.args) for r in requests]

        def loglikelihood_rolling(self, requests, disable_tqdm: bool = False):
            raise NotImplementedError

        def generate_until(self, requests, disable_tqdm: bool = False):
            raise NotImplementedError

    manager = TaskManager(include_path=str(LM_EVAL_TASKS_PATH), include_defaults=False,
                          metadata={"fuzzed": str(fuzzed), "outcomes": "success"})
    results = simple_evaluate(model=PlantedLM(), tasks=["medfuzz_medqa"], task_manager=manager, log_samples=True)
    results["config"]["model_args"] = f"model={spec.name}"  # what `--model_args model=...` records on the CLI
    samples = results.pop("samples")
    tracker = EvaluationTracker(output_path=str(out))
    tracker.save_results_aggregated(results=results, samples=samples)
    tracker.save_results_samples(task_name="medfuzz_medqa", samples=samples["medfuzz_medqa"])


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("compare")
    vulnerable, robust = _spec("vulnerable", 1.0), _spec("robust", 0.0)
    found = {"vulnerable": _inspect_run(vulnerable, VULNERABLE, root / "inspect"),
             "robust": _inspect_run(robust, ROBUST, root / "inspect")}
    for spec in (vulnerable, robust):
        _lm_eval_transfer(spec, found["vulnerable"], root / "lm-eval" / spec.name)
    found["root"] = root
    return found


def test_compare_accuracy_mcnemar_transfer_and_items_in_one_run(runs, tmp_path, capsys):
    from statsmodels.stats.contingency_tables import mcnemar as sm_mcnemar

    from medfuzz.cli import main

    assert main(["compare", str(runs["root"]), "--out", str(tmp_path)]) == 0
    printed = capsys.readouterr().out
    assert "medfuzz · medqa · Inspect" in printed and "Transfer" in printed
    data = json.loads((tmp_path / "attack_comparison.json").read_text())
    [group] = data["groups"]
    models = {m["model"]: m for m in group["models"]}
    robust, vulnerable = models["openai-api/planted/robust"], models["openai-api/planted/vulnerable"]
    assert (robust["items"], robust["attacked_accuracy"]) == (ROBUST, 1.0)
    assert (vulnerable["items"], vulnerable["attacked_accuracy"]) == (VULNERABLE, 0.0)
    assert vulnerable["clean_accuracy"] == 1.0
    [pair] = group["pairs"]
    robust_first = pair["first"] == "openai-api/planted/robust"
    # 6 paired items, every one right only for the robust model; exact p = 2 * 0.5^6, as statsmodels says
    assert pair["n"] == VULNERABLE and sorted((pair["b"], pair["c"])) == [0, VULNERABLE]
    table = [[0, VULNERABLE], [0, 0]]
    assert pair["p"] == pytest.approx(sm_mcnemar(table, exact=True).pvalue) == pytest.approx(2 * 0.5**6)
    assert pair["p_holm"] == pytest.approx(pair["p"])  # one pair: Holm changes nothing
    assert pair["more_robust"] == "openai-api/planted/robust"
    # the robust run's 7th item is reported, by id, not silently dropped
    only = pair["only_first"] if robust_first else pair["only_second"]
    assert only == ["medqa-dev-00007"] and (pair["only_second"] if robust_first else pair["only_first"]) == []
    assert group["items_not_in_every_run"] == {"openai-api/planted/robust": ["medqa-dev-00007"]}
    # transfer: the lm-eval runs evaluated the vulnerable model's 6 successful fuzzed items
    cells = {t["model"]: t for t in data["transfer"]}
    assert cells["robust"]["evaluated"] == VULNERABLE and cells["robust"]["accuracy"] == 1.0
    assert cells["vulnerable"]["accuracy"] == 0.0 and cells["vulnerable"]["transfer_rate"] == 1.0
    assert all(t["source"].startswith("openai-api/planted/vulnerable") for t in data["transfer"])
    # the robust run has no success, so nothing is left to run
    assert data["commands"] == []
    for name in ("models", "pairs", "transfer"):
        rows = list(csv.DictReader((tmp_path / f"attack_comparison_{name}.csv").open()))
        assert rows
    assert "<table>" in (tmp_path / "attack_comparison.html").read_text()


def test_compare_without_a_transfer_run_gives_the_command(runs, tmp_path):
    result = attack_compare.compare([runs["vulnerable"], runs["robust"]])
    assert result.transfer == []
    [command] = result.commands
    assert "--tasks medfuzz_medqa" in command and str(runs["vulnerable"]) in command
    assert '"outcomes": "success"' in command


def _fill(sheet: Path, out: Path, answers: dict[str, tuple[str, str, str]], comment: str = "") -> Path:
    rows = list(csv.DictReader(sheet.open(encoding="utf-8")))
    for row in rows:
        row.update(zip(QUESTIONS, answers.get(row["attack_id"], ("", "", "")), strict=True))
        row["comment"] = comment
    with out.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    return out


def test_review_round_trip_share_and_kappa(runs, tmp_path):
    from sklearn.metrics import cohen_kappa_score

    from medfuzz.report import render_all

    render_all([runs["vulnerable"], runs["robust"]], tmp_path / "report")
    sheet = tmp_path / "report" / "medfuzz_review.csv"
    ids = [row["attack_id"] for row in csv.DictReader(sheet.open(encoding="utf-8"))]
    assert len(ids) == VULNERABLE  # the robust model was never fooled
    assert 'data-id="' + ids[0] + '"' in (tmp_path / "report" / "medfuzz_review.html").read_text()
    first = {ids[0]: ("yes", "yes", "yes"), ids[1]: ("yes", "yes", "yes"), ids[2]: ("yes", "no", "yes"),
             ids[3]: ("no", "yes", "unsure"), ids[4]: ("YES", "Yes", " yes ")}  # ids[5] left blank: not reviewed
    second = {ids[0]: ("yes", "yes", "yes"), ids[1]: ("yes", "no", "yes"), ids[2]: ("yes", "no", "yes"),
              ids[3]: ("unsure", "yes", "no"), ids[4]: ("yes", "yes", "yes"), ids[5]: ("no", "no", "no")}
    a = _fill(sheet, tmp_path / "a.csv", first, comment="=HYPERLINK(x)")
    b = _fill(sheet, tmp_path / "b.csv", second)
    out = tmp_path / "review.json"
    report = import_reviews([a, b], [runs["vulnerable"]], out)
    data = json.loads(out.read_text())
    reviewer = data["reviewers"][0]
    assert (reviewer["complete"], reviewer["not_reviewed"]) == (5, 1)
    assert reviewer["validated"]["k"] == 3 and reviewer["validated"]["n"] == 5
    assert reviewer["comments"][ids[0]] == "=HYPERLINK(x)"
    # statsmodels' Wilson interval for 3/5, by hand: centre (3 + z²/2) / (5 + z²), half-width z/(5+z²) sqrt(...)
    z = 1.959963984540054
    centre = (3 + z * z / 2) / (5 + z * z)
    half = z / (5 + z * z) * math.sqrt(3 * 2 / 5 + z * z / 4)
    assert reviewer["validated"]["ci_low"] == pytest.approx(centre - half)
    assert reviewer["validated"]["ci_high"] == pytest.approx(centre + half)
    common = ids[:5]
    for position, question in enumerate(QUESTIONS):
        left = [first[i][position].strip().lower() for i in common]
        right = [second[i][position] for i in common]
        expected = cohen_kappa_score(left, right, labels=["yes", "no", "unsure"])
        got = data["agreement"]["per_question"][question]["kappa"]
        assert (math.isnan(expected) and math.isnan(got)) or got == pytest.approx(expected)
    assert data["agreement"]["validated_by_both"]["k"] == 2  # ids 0 and 4
    assert "validated (all three yes): 3/5" in report.text()


def test_review_import_names_file_row_and_field(runs, tmp_path):
    from medfuzz.report.review import known_attacks

    known = known_attacks([runs["vulnerable"]])
    attack = next(iter(known))
    sheet = tmp_path / "sheet.csv"
    header = "attack_id," + ",".join(QUESTIONS) + ",comment\n"
    sheet.write_text(header + f"{attack},yes,yes,yes,\nnot-an-attack,yes,no,yes,\n")
    with pytest.raises(DataError) as err:
        read_sheet(sheet, known)
    assert (err.value.source, err.value.row, err.value.field) == (str(sheet), 3, "attack_id")
    assert "unknown attack id 'not-an-attack'" in str(err.value)
    sheet.write_text(header + f"{attack},yes,maybe,yes,\n")
    with pytest.raises(DataError, match=r"sheet.csv, row 2, field 'violation_concerning': answer 'maybe'"):
        read_sheet(sheet, known)
    sheet.write_text(header + f"{attack},yes,yes,yes,\n{attack},no,no,no,\n")
    with pytest.raises(DataError, match=r"row 3, field 'attack_id': .* already reviewed in row 2"):
        read_sheet(sheet, known)
    sheet.write_text("attack_id,answer_still_correct,comment\n")
    with pytest.raises(DataError, match="row 1, field 'violation_concerning': column missing"):
        read_sheet(sheet, known)


def test_review_sheet_neutralises_formulas(tmp_path):
    row = {"attack_id": "x:q1#r0", "rank": 1, "model": "m", "added_text": "=HYPERLINK(\"http://x\")",
           "original_question": "Q?", "fuzzed_question": "Q? =HYPERLINK", "p_value": -0.5}
    csv_path, html_path = write_sheet([row], tmp_path)
    [written] = list(csv.DictReader(csv_path.open(encoding="utf-8")))
    assert written["added_text"].startswith("'=") and written["p_value"] == "-0.5"
    assert "<mark>" in html_path.read_text()
