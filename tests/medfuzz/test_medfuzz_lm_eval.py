"""lm-eval ``medfuzz_medqa``: hooks, the YAML through lm-eval's own evaluator, and the cached attack path."""

from __future__ import annotations

import json
import math
import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from medfuzz.models import ChatMessage
from medfuzz.solvers.medfuzz.engine import MedFuzzConfig, MedFuzzEngine
from medfuzz.solvers.medfuzz.store import read_fuzzed, write_fuzzed, write_jsonl
from medfuzz.tasks import LM_EVAL_TASKS_PATH
from medfuzz.tasks.lm_eval.medfuzz import attack_with_cache, flip_rate, pair_to_doc, process_results
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


def evaluate(lm, metadata: dict) -> dict:
    from lm_eval import simple_evaluate
    from lm_eval.tasks import TaskManager

    manager = TaskManager(include_path=str(LM_EVAL_TASKS_PATH), include_defaults=False, metadata=metadata)
    results = simple_evaluate(model=lm, tasks=["medfuzz_medqa"], task_manager=manager, log_samples=True)
    return results


async def scripted_run(weak: str, turns: int):
    t, a = models(Target(weak_spots=(weak,)), Attacker())
    engine = MedFuzzEngine(t, a, MedFuzzConfig(turns=turns, replicates=2, controls=0, exemplars=0))
    return [await engine.run_item(ITEM)]


def test_process_results_and_flip_rate():
    doc = pair_to_doc("x", ITEM, ITEM.with_question(ITEM.question + " He enjoys clue1."))
    assert len(doc["choices"]) == 8 and doc["choices"][0].endswith("Answer: A") and doc["context"]
    # clean: C best (index 2) -> right; fuzzed: A best -> wrong
    results = [(-9, False), (-9, False), (-1, False), (-9, False), (-2, False), (-9, False), (-3, False), (-9, False)]
    assert process_results(doc, results) == {"clean_acc": (True, False), "attacked_acc": (True, False),
                                             "flip_rate": (True, False)}
    assert flip_rate([(True, False), (True, True), (False, False), (False, True)]) == 0.5
    assert math.isnan(flip_rate([(False, True)]))


async def test_fuzzed_file_through_lm_eval(tmp_path):
    results = await scripted_run("clue2", turns=2)  # both replicates succeed at turn 2
    failed = await scripted_run("clue9", turns=1)  # both replicates fail; last tried question has clue1
    path = write_fuzzed(results + failed, tmp_path / "fuzzed.jsonl")
    assert len(read_fuzzed(path)) == 4 and len(read_fuzzed(path, ["success"])) == 2
    out = evaluate(WeakLM("clue2"), {"fuzzed": str(path)})
    metrics = out["results"]["medfuzz_medqa"]
    # clean always right; the LM is fooled by clue2 (2 docs) but not by clue1 (2 docs)
    assert metrics["clean_acc,none"] == 1.0 and metrics["attacked_acc,none"] == 0.5
    assert metrics["flip_rate,none"] == 0.5
    ids = sorted(s["doc"]["id"] for s in out["samples"]["medfuzz_medqa"])
    assert ids == ["q1#r0", "q1#r0", "q1#r1", "q1#r1"]
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

    def __init__(self, target: Target, attacker: Attacker) -> None:
        self.calls = 0
        actors = {"target": target, "attacker": attacker}
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                server.calls += 1
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
    other = attack_with_cache("medqa", target_base_url="http://127.0.0.1:9/v1", **{**settings, "seed": 1})
    assert [r.replicates[0].outcome.value for r in other] == ["llm_error"] * 2  # unreachable: errors, no crash
    # a connection failure is not a fact about the item: nothing stored, the next run asks again
    assert [p for p in (tmp_path / "cache").glob("medqa-*.jsonl") if p != good_cache] == []


def test_docs_need_a_source_and_some_fuzzed_items(tmp_path, monkeypatch):
    from medfuzz.tasks.lm_eval import _options
    from medfuzz.tasks.lm_eval.medfuzz import medfuzz_docs

    monkeypatch.setattr(_options, "model_arg_names", lambda: frozenset({"pretrained"}))
    with pytest.raises(ValueError, match="needs --metadata"):
        medfuzz_docs("medqa", pretrained="x")  # model_args arrive too and are left to the model
    record = {"id": "x", "outcome": "llm_error", "original": ITEM.to_record(), "fuzzed": ITEM.to_record()}
    path = write_jsonl([record], tmp_path / "errors.jsonl")
    with pytest.raises(ValueError, match="no fuzzed items"):
        medfuzz_docs("medqa", fuzzed=str(path))
    docs = medfuzz_docs("medqa", fuzzed=str(path), outcomes="llm_error")["test"]
    assert docs.num_rows == 1 and docs[0]["id"] == "x"
