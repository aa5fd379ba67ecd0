"""lm-eval ``medfuzz_medqa``: hooks, the YAML through lm-eval's own evaluator, and the cached attack path."""

from __future__ import annotations

import json
import math
import re
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from medfuzz.models import ChatMessage
from medfuzz.options import ConfigError
from medfuzz.solvers.medfuzz.engine import MedFuzzConfig, MedFuzzEngine
from medfuzz.solvers.medfuzz.store import read_fuzzed, write_fuzzed, write_jsonl
from medfuzz.tasks import LM_EVAL_TASKS_PATH
from medfuzz.tasks.lm_eval.medfuzz import attack_with_cache, count, pair_to_doc, process_results, unscored_doc
from tests.medfuzz.medfuzz_actors import ITEM, Attacker, Target, models


class WeakLM:
    """An lm-eval LM whose letter loglikelihoods favour ``Ceftriaxone`` unless a weak spot is in the prompt.

    Each continuation also carries a prompt-length term, like the shared log p(prompt) of real models.
    """

    def __new__(cls, weak_spot: str):
        from lm_eval.api.model import LM

        class _WeakLM(LM):
            def loglikelihood(self, requests, disable_tqdm: bool = False):
                out = []
                for request in requests:
                    _, continuation = request.args
                    options = dict(re.findall(r"^([A-J])\. (.+)$", continuation, re.M))
                    wanted = "Gentamicin" if weak_spot in continuation else "Ceftriaxone"
                    letter = continuation.rstrip()[-1]
                    score = -len(continuation) / 7 + (0.0 if options.get(letter) == wanted else -4.0)
                    out.append((score, False))
                return out

            def loglikelihood_rolling(self, requests, disable_tqdm: bool = False):
                raise NotImplementedError

            def generate_until(self, requests, disable_tqdm: bool = False):
                raise NotImplementedError

        return _WeakLM()


def evaluate(lm, metadata: dict, bootstrap_iters: int = 1000) -> dict:
    from lm_eval import simple_evaluate
    from lm_eval.tasks import TaskManager

    manager = TaskManager(include_path=str(LM_EVAL_TASKS_PATH), include_defaults=False, metadata=metadata)
    results = simple_evaluate(model=lm, tasks=["medfuzz_medqa"], task_manager=manager, log_samples=True,
                              bootstrap_iters=bootstrap_iters)
    return results


def old_aggregations(samples: list[dict]) -> dict[str, float]:
    """The aggregations of the previous release (``stats`` over the (clean, fuzzed) pairs of the scored docs),
    recomputed from the logged log-likelihoods: the per-doc values must reproduce them exactly."""
    from medfuzz import stats
    from medfuzz.records.lm_eval_docs import versions_correct

    pairs = [versions_correct(s["doc"], s["filtered_resps"]) for s in samples if s["doc"]["scored"]]
    return {"clean_acc": stats.clean_accuracy(pairs), "attacked_acc": stats.attacked_accuracy(pairs),
            "flip_rate": stats.flip_rate(pairs)}


async def scripted_run(weak: str, turns: int):
    t, a = models(Target(weak_spots=(weak,)), Attacker())
    engine = MedFuzzEngine(t, a, MedFuzzConfig(turns=turns, replicates=2, controls=0, exemplars=0))
    return [await engine.run_item(ITEM)]


def test_process_results_gives_per_doc_values_for_lm_eval_s_own_aggregations():
    from lm_eval.api.metrics import mean

    doc = pair_to_doc("x", ITEM, ITEM.with_question(ITEM.question + " He enjoys clue1."))
    assert len(doc["choices"]) == 8 and doc["choices"][0].endswith("Answer: A") and doc["context"]
    # clean: C best (index 2) -> right; fuzzed: A best -> wrong
    results = [(-9, False), (-9, False), (-1, False), (-9, False), (-2, False), (-9, False), (-3, False), (-9, False)]
    assert process_results(doc, results) == {"clean_acc": 1.0, "attacked_acc": 0.0, "flip_rate": 1.0,
                                             "llm_error_rate": 0.0, "llm_errors": 0.0}
    wrong_clean = process_results(doc, results[4:] + results[:4])  # clean: A (wrong), fuzzed: C (right)
    assert wrong_clean["clean_acc"] == 0.0 and wrong_clean["attacked_acc"] == 0.0
    assert "flip_rate" not in wrong_clean  # outside flip_rate's denominator: lm-eval aggregates it without this doc
    error = process_results(unscored_doc("y", ITEM, "llm_error", None), [(-0.1, True)])
    assert error == {"llm_error_rate": 1.0, "llm_errors": 1.0}  # counted, not scored

    def over_its_docs(metric: str) -> float:  # lm-eval's mean over the docs that return the metric
        return mean([v[metric] for v in values if metric in v])

    values = [process_results(doc, results), wrong_clean, error]
    assert over_its_docs("flip_rate") == 1.0 and over_its_docs("clean_acc") == 0.5
    assert count([v["llm_errors"] for v in values]) == 1.0


async def test_fuzzed_file_through_lm_eval(tmp_path):
    results = await scripted_run("clue2", turns=2)  # both replicates succeed at turn 2
    failed = await scripted_run("clue9", turns=1)  # both replicates fail; last tried question has clue1
    path = write_fuzzed(results + failed, tmp_path / "fuzzed.jsonl")
    records = [json.loads(line) for line in path.read_text().splitlines()]
    # five copies (enough docs that no bootstrap resample misses flip_rate's denominator) and one attack that
    # ended as an LLM error
    copies = [{**r, "id": f"{r['id']}-{k}"} for k in range(5) for r in records]
    errored = {**records[0], "id": "q1#r7", "outcome": "llm_error"}
    path = write_jsonl([*copies, errored], tmp_path / "with_error.jsonl")
    assert len(read_fuzzed(path)) == 20 and len(read_fuzzed(path, ["success"])) == 10
    out = evaluate(WeakLM("clue2"), {"fuzzed": str(path)})
    metrics = out["results"]["medfuzz_medqa"]
    # clean always right; the LM is fooled by clue2 (10 docs) but not by clue1 (10 docs)
    assert metrics["clean_acc,none"] == 1.0 and metrics["attacked_acc,none"] == 0.5
    assert metrics["flip_rate,none"] == 0.5
    assert metrics["llm_errors,none"] == 1.0 and metrics["llm_error_rate,none"] == pytest.approx(1 / 21)
    for name in ("clean_acc", "attacked_acc", "flip_rate", "llm_error_rate"):  # lm-eval's own standard errors
        assert isinstance(metrics[f"{name}_stderr,none"], float), (name, metrics)
    assert metrics["llm_errors_stderr,none"] == "N/A"  # a count of this run, not an estimate
    # bootstrap of a proportion of 0.5 over 20 docs: close to the binomial SE
    assert metrics["flip_rate_stderr,none"] == pytest.approx(math.sqrt(0.25 / 20), rel=0.25)
    assert metrics["clean_acc_stderr,none"] == 0.0
    assert metrics["llm_error_rate_stderr,none"] == pytest.approx(  # mean_stderr: sample SD (n - 1) / sqrt(n)
        math.sqrt((1 / 21) * (20 / 21) * 21 / 20 / 21))
    samples = out["samples"]["medfuzz_medqa"]
    assert {k: pytest.approx(v) for k, v in old_aggregations(samples).items()} == {
        k: metrics[f"{k},none"] for k in ("clean_acc", "attacked_acc", "flip_rate")}
    assert len(samples) == 21 and [s["doc"]["id"] for s in samples if not s["doc"]["scored"]] == ["q1#r7"]
    only = evaluate(WeakLM("clue2"), {"fuzzed": str(path), "outcomes": "success"})
    assert only["results"]["medfuzz_medqa"]["flip_rate,none"] == 1.0


def test_tampered_fuzzed_file_is_rejected(tmp_path):
    record = {"id": "x", "outcome": "success", "original": ITEM.to_record(),
              "fuzzed": {**ITEM.to_record(), "answer": "A", "question": "changed"}}
    path = write_jsonl([record], tmp_path / "bad.jsonl")
    with pytest.raises(ValueError, match="options or answer differ"):
        read_fuzzed(path)


class ActorsServer:
    """A tiny OpenAI-compatible chat server on 127.0.0.1 that answers with the scripted actors."""

    def __init__(self, target: Target, attacker: Attacker, fault: Callable[[dict], str | None] | None = None) -> None:
        """``fault(body)``: ``"500"`` answers the request with HTTP 500, ``"hang"`` answers it after 3 s."""
        self.calls = 0
        self.faulted = 0
        actors = {"target": target, "attacker": attacker}
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                server.calls += 1
                kind = fault(body) if fault else None
                if kind:
                    server.faulted += 1
                if kind == "500":
                    self.send_response(500)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                if kind == "hang":
                    time.sleep(3)
                messages = [ChatMessage(m["role"], m["content"]) for m in body["messages"]]
                reply = actors[body["model"]](messages, {"seed": body.get("seed")})
                payload = {"id": "x", "object": "chat.completion", "created": 0, "model": body["model"],
                           "choices": [{"index": 0, "finish_reason": "stop",
                                        "message": {"role": "assistant", "content": str(reply)}}],
                           "usage": {"prompt_tokens": 5, "completion_tokens": 5, "total_tokens": 10}}
                data = json.dumps(payload).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args):
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def __enter__(self) -> str:
        self.thread.start()
        return f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    def __exit__(self, *exc) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def medqa_file(path: Path, count: int) -> Path:
    """``count`` items in the MedQA release layout, all with ITEM's options and answer, different stems."""
    rows = [{"question": f"Case {i}: " + ITEM.question, "options": ITEM.options, "answer_idx": ITEM.answer,
             "answer": ITEM.options[ITEM.answer]} for i in range(count)]
    return write_jsonl(rows, path)


def test_attack_first_is_cached_and_resumable(tmp_path):
    data = medqa_file(tmp_path / "items.jsonl", 3)
    server = ActorsServer(Target(weak_spots=("clue1",)), Attacker())
    settings = {"target_model": "target", "attacker_model": "attacker", "data": str(data), "turns": 2,
                "replicates": 1, "exemplars": 0, "controls": 0, "cache_dir": str(tmp_path / "cache"),
                "attack_limit": 2}
    with server as url:
        first = attack_with_cache("medqa", target_base_url=url, **settings, attack_concurrency=2)
        calls = server.calls
        again = attack_with_cache("medqa", target_base_url=url, **settings)
        assert server.calls == calls  # all from the cache
        more = attack_with_cache("medqa", target_base_url=url, **{**settings, "attack_limit": 3})
        # only the third item was attacked: original pass (3 target calls) + 1 turn (2 attacker, 3 target)
        assert server.calls - calls == 8
    assert [r.item.id for r in first] == [r.item.id for r in again] == [r.item.id for r in more][:2]
    assert [r.to_dict() for r in first] == [r.to_dict() for r in again]
    assert [r.replicates[0].outcome.value for r in more] == ["success"] * 3
    [good_cache] = list((tmp_path / "cache").glob("medqa-*.jsonl"))
    from medfuzz.models.failures import ModelConfigError

    with pytest.raises(ModelConfigError, match="cannot reach the model server"):  # unreachable: the run stops
        attack_with_cache("medqa", target_base_url="http://127.0.0.1:9/v1", **{**settings, "seed": 1})
    # a connection failure is not a fact about the item: nothing stored, the next run asks again
    assert [p for p in (tmp_path / "cache").glob("medqa-*.jsonl") if p != good_cache] == []


def test_docs_need_a_source_and_some_fuzzed_items(tmp_path, monkeypatch):
    from medfuzz.tasks.lm_eval import hook_options
    from medfuzz.tasks.lm_eval.medfuzz import medfuzz_docs

    monkeypatch.setattr(hook_options, "model_arg_names", lambda: frozenset({"pretrained"}))
    with pytest.raises(ValueError, match="needs --metadata"):
        medfuzz_docs("medqa", pretrained="x")  # model_args arrive too and are left to the model
    record = {"id": "x", "outcome": "llm_error", "original": ITEM.to_record(), "fuzzed": ITEM.to_record()}
    path = write_jsonl([record], tmp_path / "errors.jsonl")
    with pytest.raises(ValueError, match="no fuzzed items"):
        medfuzz_docs("medqa", fuzzed=str(path))
    docs = medfuzz_docs("medqa", fuzzed=str(path), outcomes="llm_error")["test"]
    assert docs.num_rows == 1 and docs[0]["id"] == "x"


def _fails_on(stem: str, kind: str = "500") -> Callable[[dict], str | None]:
    """Target calls about the item whose question starts with ``stem`` fail."""
    return lambda body: kind if body["model"] == "target" and any(
        stem in m["content"] for m in body["messages"]) else None


SMALL = {"target_model": "target", "attacker_model": "attacker", "turns": 1, "replicates": 2, "exemplars": 0,
         "controls": 0, "max_retries": 0}


def test_a_fault_run_reports_its_llm_errors(tmp_path, monkeypatch, caplog):
    """Through lm-eval's evaluator: the replicates of an item whose target calls fail are docs counted by
    ``llm_errors`` / ``llm_error_rate`` (and logged), not silently left out; the rest are scored as before."""
    monkeypatch.setenv("MEDFUZZ_CALL_CACHE", "off")
    data = medqa_file(tmp_path / "items.jsonl", 3)
    with ActorsServer(Target(weak_spots=("clue1",)), Attacker(), fault=_fails_on("Case 1:")) as url:
        out = evaluate(WeakLM("clue1"), {**SMALL, "target_base_url": url, "data": str(data), "call_retries": 0,
                                         "cache_dir": str(tmp_path / "cache")}, bootstrap_iters=0)
    metrics = out["results"]["medfuzz_medqa"]
    assert metrics["llm_errors,none"] == 2 and metrics["llm_error_rate,none"] == pytest.approx(2 / 6)
    assert metrics["clean_acc,none"] == 1.0 and metrics["flip_rate,none"] == 1.0  # the 4 attacked replicates
    docs = [s["doc"] for s in out["samples"]["medfuzz_medqa"]]
    assert sorted((d["original_question"][:7], d["outcome"], d["scored"]) for d in docs) == [
        ("Case 0:", "success", True), ("Case 0:", "success", True), ("Case 1:", "llm_error", False),
        ("Case 1:", "llm_error", False), ("Case 2:", "success", True), ("Case 2:", "success", True)]
    assert "medfuzz_medqa: 2 of 6 replicates ended as LLM errors" in caplog.text  # said, not only counted


def test_call_timeout_and_retries_reach_the_client(tmp_path, monkeypatch):
    monkeypatch.setenv("MEDFUZZ_CALL_CACHE", "off")
    data = medqa_file(tmp_path / "items.jsonl", 2)
    settings = {**SMALL, "data": str(data), "replicates": 1, "cache_dir": str(tmp_path / "cache")}
    faulted = []
    for retries in (0, 2):
        server = ActorsServer(Target(weak_spots=("clue1",)), Attacker(), fault=_fails_on("Case 1:"))
        with server as url:
            results = attack_with_cache("medqa", target_base_url=url, **settings, call_retries=retries)
        faulted.append(server.faulted)
        assert [r.replicates[0].outcome.value for r in results] == ["success", "llm_error"]
    assert faulted[0] >= 1 and faulted[1] == 3 * faulted[0]  # every failing call was tried 1 + call_retries times
    started = time.monotonic()
    with ActorsServer(Target(weak_spots=("clue1",)), Attacker(), fault=_fails_on("Case 1:", "hang")) as url:
        results = attack_with_cache("medqa", target_base_url=url, **settings, call_timeout=0.3, call_retries=0)
    assert [r.replicates[0].outcome.value for r in results] == ["success", "llm_error"]
    assert "timed out" in json.dumps(results[1].to_dict()).lower()
    assert time.monotonic() - started < 2.5  # cut at 0.3 s per attempt, not after the server's 3 s
    with pytest.raises(ConfigError, match="call_timeout must be positive"):
        attack_with_cache("medqa", target_base_url="http://127.0.0.1:9/v1", **settings, call_timeout=0)
