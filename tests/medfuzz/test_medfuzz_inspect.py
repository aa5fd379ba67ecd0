"""``medfuzz/medfuzz_medqa`` through Inspect's own eval loop, offline, with scripted target and attacker roles."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest
from inspect_ai import eval as inspect_eval
from inspect_ai.model import (
    ChatCompletionChoice,
    ChatMessageAssistant,
    GenerateConfig,
    Logprob,
    Logprobs,
    ModelAPI,
    ModelOutput,
    ModelUsage,
    TopLogprob,
    modelapi,
)

from medfuzz.benchmarks.selection import DataSelection
from medfuzz.models import ChatMessage, Generation
from medfuzz.stats import permutation_p_value
from medfuzz.tasks.inspect.medfuzz import medfuzz_medqa
from tests.medfuzz.medfuzz_actors import ITEM, Attacker, Target, probability_table

ACTORS: dict[str, Any] = {}


@modelapi(name="medfuzz-actors")
class ActorsAPI(ModelAPI):
    """``medfuzz-actors/<name>`` answers with the scripted actor registered under ``<name>``."""

    def __init__(self, model_name: str, base_url: str | None = None, api_key: str | None = None,
                 config: GenerateConfig | None = None, **kwargs: Any) -> None:
        super().__init__(model_name, base_url, api_key, [], config or GenerateConfig())

    async def generate(self, input, tools, tool_choice, config) -> ModelOutput:
        messages = [ChatMessage(m.role, m.text) for m in input]
        reply = ACTORS[self.model_name](messages, {"seed": config.seed})
        if isinstance(reply, Exception):
            raise reply
        generation = reply if isinstance(reply, Generation) else Generation(text=reply)
        logprobs = None
        if config.logprobs and generation.letter_logprobs:
            top = [TopLogprob(token=k, logprob=v) for k, v in generation.letter_logprobs.items()]
            chosen = generation.letter_logprobs.get(generation.text, -30.0)
            logprobs = Logprobs(content=[Logprob(token=generation.text, logprob=chosen, top_logprobs=top)])
        usage = ModelUsage(input_tokens=10, output_tokens=2, total_tokens=12)
        choice = ChatCompletionChoice(message=ChatMessageAssistant(content=generation.text), stop_reason="stop",
                                      logprobs=logprobs)
        return ModelOutput(model=self.model_name, choices=[choice], usage=usage)


@pytest.fixture
def medqa_file(tmp_path: Path) -> Path:
    path = tmp_path / "items.jsonl"
    other = {**ITEM.to_record(), "question": "A 5-year-old girl has a rash and fever. Which drug treats it?"}
    rows = [{"question": r["question"], "options": r["options"], "answer_idx": r["answer"],
             "answer": r["options"][r["answer"]], "meta_info": "step1"} for r in (ITEM.to_record(), other)]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_medfuzz_task_end_to_end_with_scripted_roles(medqa_file, tmp_path):
    ACTORS["target"] = Target(weak_spots=("clue2",), probabilities=probability_table)
    ACTORS["attacker"] = Attacker()
    # one batch of all 3 controls: the scripted attacker names its controls by call count, so which replicate
    # gets the exceeding one (knitting2) depends on how the two replicates' control calls interleave
    task = medfuzz_medqa(data=str(medqa_file), turns=3, replicates=2, exemplars=1, exemplar_data=str(medqa_file),
                         controls=3, option_orders=2, pvalue_prompt="direct", control_batch=3)
    [log] = inspect_eval(task, model="medfuzz-actors/target", model_roles={"attacker": "medfuzz-actors/attacker"},
                         log_dir=str(tmp_path / "logs"), display="none")
    assert log.status == "success", log.error
    metrics = {name: m.value for s in log.results.scores for name, m in s.metrics.items()}
    # the headline first (Inspect's log list shows it): post-attack accuracy, then ASR
    assert list(log.results.scores[0].metrics)[:2] == ["medfuzz_post_attack_acc", "medfuzz_asr"]
    # both items, both replicates: right on the original, flipped at turn 2
    assert metrics["medfuzz_clean_acc"] == 1.0 and metrics["medfuzz_post_attack_acc"] == 0.0
    assert metrics["medfuzz_asr"] == 1.0 and metrics["medfuzz_turns_to_success"] == 2.0
    assert [metrics[f"k{k}"] for k in range(4)] == [1.0, 1.0, 0.0, 0.0]
    assert metrics["medfuzz_llm_error_rate"] == 0.0
    sample = log.samples[0]
    score = sample.scores["medfuzz_scorer"]
    assert score.value["success"] == 2 and score.value["tested"] == 2
    story = score.metadata["replicates"][0]
    assert story["outcome"] == "success" and story["success_turn"] == 2
    assert story["turns"][1]["plan"] and story["turns"][1]["postmortem"]
    assert story["fuzzed_question"].endswith("enjoys clue2.")
    assert story["original"]["confidences"] == {"A": 1, "B": 1, "C": 5, "D": 1}
    assert story["faithfulness"]["verdict"] in ("none", "some", "all")
    sig = story["significance"]
    assert (sig["p0"], sig["pa"]) == (pytest.approx(0.9), pytest.approx(0.2)) and len(sig["controls"]) == 3
    # the p-value in the log is Algorithm 2 on the p-hats in the log (hand-checked in test_medfuzz_significance)
    # (sequential policy: h = 1 exceedance of 3 controls stops the test; Besag-Clifford p = 1 / l)
    assert sig["policy"] == "sequential" and sig["stop_at"] == 1
    expected = permutation_p_value(sig["p0"], sig["pa"], [c["p_hat"] for c in sig["controls"]], stop_at=1).p_value
    assert story["p_value"] == pytest.approx(expected) and story["permutation"]["controls"] == 2
    assert story["permutation"]["scored"] == 3 and story["untested"] is None
    assert len(score.metadata["p_values"]) == 2
    assert story["usage"]["attacker"]["calls"] > 0 and story["usage"]["target_significance"]["calls"] == 10
    from statsmodels.stats.multitest import multipletests

    all_p = [p for sample in log.samples for p in sample.scores["medfuzz_scorer"].metadata["p_values"]]
    assert len(all_p) == 4  # 2 items x 2 successful replicates, all tested
    for name, method in (("medfuzz_significant_holm", "holm"), ("medfuzz_significant_bh", "fdr_bh")):
        assert metrics[name] == sum(multipletests(all_p, method=method)[1] <= 0.05)
    assert not math.isnan(metrics["medfuzz_unfaithful_rate"])
    assert metrics["medfuzz_misses_some_rate"] >= metrics["medfuzz_unfaithful_rate"]
    assert metrics["medfuzz_post_attack_acc_upper"] == 0.0 and metrics["medfuzz_attack_error_share"] == 0.0
    assert metrics["medfuzz_untested_attacks"] == 0.0
    # costs: per item (2 items), per success (4), per p-value (4 tests); p-hat of the original once per item
    scores = [s.scores["medfuzz_scorer"] for s in log.samples]
    target_calls = sum(v for sc in scores for r in sc.metadata["replicates"]
                       for role, u in r["usage"].items() if role.startswith("target") for v in [u["calls"]])
    assert metrics["medfuzz_target_calls_per_item"] == target_calls / 2
    assert metrics["medfuzz_target_calls_per_success"] == target_calls / 4
    # direct p-hats, 2 orders, per item: p0 once (2), the attack once (2: both replicates wrote the same
    # attack, so the second one's requests are served from the request cache) and 2 x 3 controls (12)
    assert metrics["medfuzz_target_calls_per_pvalue"] == 2 * (2 + 2 + 12) / 4
    assert score.metadata["cache_hits"] == {"target_significance": 2}
    assert metrics["medfuzz_attacker_calls_per_pvalue"] == 3.0 and metrics["medfuzz_controls_per_pvalue"] == 3.0
    assert [r["significance"]["p0_shared"] for r in score.metadata["replicates"]] == [False, True]
    # a separate attacker role: recorded as such
    assert score.metadata["config"]["attacker_is_target"] is False and sample.metadata["attacker_is_target"] is False


def test_alpha_of_the_run_reaches_every_count_metric_and_report_number(medqa_file, tmp_path, caplog):
    """-T alpha=0.01 against the default 0.05 on the same run: every significance count moves with it."""
    from medfuzz.report.medfuzz import render
    from tests.medfuzz.test_medfuzz_sequential import control_writer, probabilities

    results = {}
    for alpha in (0.05, 0.01):
        # no control moves p-hat as far as the attack: every valid p-value is 1/31 = 0.032, the paper's b/M 0
        ACTORS["target"] = Target(weak_spots=("clue1",), probabilities=probabilities)
        ACTORS["attacker"] = Attacker(controls=control_writer(set()))
        task = medfuzz_medqa(data=str(medqa_file), turns=1, replicates=2, exemplars=0, controls=30,
                             option_orders=1, pvalue_prompt="direct", alpha=alpha)
        with caplog.at_level("WARNING"):  # said when the run starts, for its samples
            [log] = inspect_eval(task, model="medfuzz-actors/target",
                                 model_roles={"attacker": "medfuzz-actors/attacker"},
                                 log_dir=str(tmp_path / f"logs{alpha}"), display="none")
        assert log.status == "success", log.error
        metrics = {name: m.value for s in log.results.scores for name, m in s.metrics.items()}
        render([Path(log.location)], tmp_path / f"report{alpha}")
        with open(tmp_path / f"report{alpha}" / "medfuzz_summary.csv") as handle:
            import csv

            [summary] = list(csv.DictReader(handle))
        results[alpha] = (metrics, summary)
    strict, loose = results[0.01], results[0.05]
    names = ("medfuzz_significant", "medfuzz_significant_holm", "medfuzz_significant_bh", "medfuzz_significant_paper")
    # the first item's 2 attacks are tested at p = 1/31 (the scripted controls fit only that item: the other's
    # 2 attacks are untested): unadjusted and BH reject both at 0.05 (Holm needs 1/31 <= 0.05/2: no); none at
    # 0.01; the paper's b/M = 0 rejects both at either level
    assert [loose[0][n] for n in names] == [2, 0, 2, 2] and [strict[0][n] for n in names] == [0, 0, 0, 2]
    assert loose[0]["medfuzz_untested_attacks"] == 2
    assert loose[0]["medfuzz_smallest_p"] == pytest.approx(1 / 31) and loose[0]["medfuzz_holm_attainable"] == 0.0
    assert loose[0]["medfuzz_bh_attainable"] == 1.0 and strict[0]["medfuzz_bh_attainable"] == 0.0
    assert loose[0]["medfuzz_controls_for_holm"] == 39 and strict[0]["medfuzz_controls_for_holm"] == 199
    columns = ("significant", "significant_holm", "significant_bh", "significant_paper")
    assert [loose[1][c] for c in columns] == ["2", "0", "2", "2"] and strict[1]["alpha"] == "0.01"
    assert [strict[1][c] for c in columns] == ["0", "0", "0", "2"]
    assert loose[1]["holm_attainable"] == "False" and loose[1]["smallest_p"] == f"{1 / 31:.4g}"
    # said before the first call: at 0.01, 1/31 cannot be significant at all; at 0.05 Holm is out of reach
    text = " ".join(r.getMessage() for r in caplog.records)
    assert "no attack can be significant" in text and "-T holm_family=4" in text


def test_report_from_the_log(medqa_file, tmp_path):
    from medfuzz.report.format import highlight
    from medfuzz.report.medfuzz import render
    from medfuzz.report.medfuzz_logs import chance_level

    ACTORS["target"] = Target(weak_spots=("clue2", "clue1"), probabilities=probability_table)
    ACTORS["attacker"] = Attacker()
    task = medfuzz_medqa(data=str(medqa_file), turns=2, replicates=1, exemplars=0, controls=2, option_orders=1,
                         pvalue_prompt="direct")
    [log] = inspect_eval(task, model="medfuzz-actors/target", model_roles={"attacker": "medfuzz-actors/attacker"},
                         log_dir=str(tmp_path / "logs"), display="none")
    other = tmp_path / "not_a_log.json"
    other.write_text("{}")
    written = render([Path(log.location), other], tmp_path / "report")
    assert [p.name for p in written] == ["medfuzz_attacks.csv", "medfuzz_summary.csv", "medfuzz_attacks.html",
                                         "medfuzz_accuracy_vs_attempts.csv", "medfuzz_accuracy_vs_attempts.png",
                                         "medfuzz_review.csv", "medfuzz_review.html"]
    import csv

    [summary] = list(csv.DictReader(written[1].open()))
    assert summary["post_attack_accuracy"] == summary["post_attack_accuracy_upper"] == "0"
    assert summary["attacker_is_target"] == "False" and summary["items"] == "2" and summary["untested"] == "0"
    assert float(summary["target_calls_per_pvalue"]) > 0 and summary["misses_some_rate"]
    written.pop(1)
    rows = list(csv.DictReader(written[0].open()))
    assert {r["status"] for r in rows} == {"tested"}
    assert len(rows) == 2 and {r["turn"] for r in rows} == {"1"}
    assert rows[0]["added_text"] == "The patient enjoys clue1."
    assert [r["rank"] for r in rows] == ["1", "2"] and float(rows[0]["p_value"]) <= float(rows[1]["p_value"])
    page = written[1].read_text()
    assert "<mark>The patient enjoys clue1.</mark>" in page
    curve = list(csv.DictReader(written[2].open()))
    assert [float(r["accuracy"]) for r in curve] == [1.0, 0.0, 0.0]
    assert written[3].stat().st_size > 1000
    # the plot's chance line: a uniform guess over the items' 4 options; a 5-option item moves the mean
    assert chance_level(log) == 0.25
    log.samples[0].scores["medfuzz_scorer"].metadata["item"]["options"]["E"] = "Vancomycin"
    assert chance_level(log) == (1 / 5 + 1 / 4) / 2
    assert render([other], tmp_path / "nothing") == [] and not (tmp_path / "nothing").exists()
    assert highlight("a b c", "a x b c") == "a <mark>x</mark> b c"


def test_a_users_own_task_built_on_medfuzz_task_gets_the_report(medqa_file, tmp_path):
    """The report recognises a MedFuzz run by the task's ``medfuzz_method`` metadata, not by its name."""
    import csv

    from inspect_ai import task

    from medfuzz.report.medfuzz import render
    from medfuzz.solvers.medfuzz.config import MedFuzzConfig
    from medfuzz.tasks.inspect.medfuzz import medfuzz_task

    @task(name="my_robustness_eval")
    def my_robustness_eval():
        config = MedFuzzConfig(turns=2, replicates=1, exemplars=0, controls=2, option_orders=1, pvalue_prompt="direct")
        return medfuzz_task("medqa", DataSelection(data=str(medqa_file)), config)

    ACTORS["target"] = Target(weak_spots=("clue2", "clue1"), probabilities=probability_table)
    ACTORS["attacker"] = Attacker()
    [log] = inspect_eval(my_robustness_eval(), model="medfuzz-actors/target",
                         model_roles={"attacker": "medfuzz-actors/attacker"}, log_dir=str(tmp_path / "logs"),
                         display="none")
    assert log.status == "success" and log.eval.task.endswith("my_robustness_eval")
    render([Path(log.location)], tmp_path / "report")
    with open(tmp_path / "report" / "medfuzz_summary.csv") as handle:
        [row] = list(csv.DictReader(handle))
    assert row["run"].endswith("my_robustness_eval") and row["items"] == "2"


def test_scorer_reads_faithfulness_and_pack_from_the_recorded_config(medqa_file, tmp_path):
    """One owner: ``-T faithfulness=judge -T pack=prior_opinion`` reach the scorer through the config the solver
    recorded (the scorer takes no parameters of its own); the judge is told the run's pack."""
    import inspect as pyinspect

    from medfuzz.solvers.medfuzz.prompts import load_pack
    from medfuzz.tasks.inspect.medfuzz import medfuzz_scorer

    assert not pyinspect.signature(medfuzz_scorer).parameters
    asked: list[str] = []

    def judge(messages, options):
        asked.append(messages[-1].content)
        return "1: yes"

    ACTORS.update(target=Target(weak_spots=("clue2",), probabilities=probability_table), attacker=Attacker(),
                  judge=judge)
    task = medfuzz_medqa(data=str(medqa_file), limit=1, turns=2, replicates=1, exemplars=0, controls=0,
                         faithfulness="judge", pack="prior_opinion")
    [log] = inspect_eval(task, model="medfuzz-actors/target",
                         model_roles={"attacker": "medfuzz-actors/attacker", "judge": "medfuzz-actors/judge"},
                         log_dir=str(tmp_path / "logs"), display="none")
    assert log.status == "success", log.error
    story = log.samples[0].scores["medfuzz_scorer"].metadata["replicates"][0]
    assert story["outcome"] == "success" and story["faithfulness"]["method"] == "judge"
    assert asked and f"The following {load_pack('prior_opinion').added_kind} were added" in asked[0]
