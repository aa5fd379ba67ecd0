"""The three backends behind the ChatModel protocol, each driven by a scripted model."""

from __future__ import annotations

import asyncio
import json
import math

import httpx
import pytest

from medfuzz.models import ChatMessage, ChatModel, Generation, UsageLedger
from medfuzz.models.openai_compat import OpenAIChatModel

MESSAGES = [ChatMessage("system", "Be brief."), ChatMessage("user", "Question? A. x B. y")]


def chat_completion(content: str, logprobs: list[tuple[str, float, list[tuple[str, float]]]] | None) -> dict:
    choice: dict = {"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": content}}
    if logprobs is not None:
        choice["logprobs"] = {"content": [
            {"token": t, "logprob": lp, "bytes": None,
             "top_logprobs": [{"token": a, "logprob": alp, "bytes": None} for a, alp in top]}
            for t, lp, top in logprobs
        ]}
    return {"id": "x", "object": "chat.completion", "created": 0, "model": "m", "choices": [choice],
            "usage": {"prompt_tokens": 11, "completion_tokens": 2, "total_tokens": 13}}


def openai_model(handler) -> OpenAIChatModel:
    client = httpx.AsyncClient(transport=httpx.MockTransport(handler))
    return OpenAIChatModel("m", base_url="http://test/v1", api_key="k", max_retries=0, http_client=client)


async def test_openai_letters_and_usage():
    seen: list[dict] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(json.loads(request.content))
        return httpx.Response(200, json=chat_completion(
            "B", [("B", math.log(0.6), [("B", math.log(0.6)), (" A", math.log(0.3))])]))

    model = openai_model(handler)
    assert isinstance(model, ChatModel)
    out = await model.generate(MESSAGES, max_tokens=5, temperature=0.0, seed=7, letters="AB")
    assert out.ok and out.text == "B"
    assert out.letter_logprobs == {"B": pytest.approx(math.log(0.6)), "A": pytest.approx(math.log(0.3))}
    assert (out.usage.input_tokens, out.usage.output_tokens) == (11, 2)
    body = seen[0]
    assert body["logprobs"] is True and body["top_logprobs"] == 20 and body["seed"] == 7
    assert body["messages"][0] == {"role": "system", "content": "Be brief."}


async def test_openai_without_logprobs_reports_not_available():
    model = openai_model(lambda r: httpx.Response(200, json=chat_completion("B", None)))
    out = await model.generate(MESSAGES, letters="AB")
    assert out.ok and out.letter_logprobs is None
    out = await model.generate(MESSAGES)  # no letters asked: none requested
    assert out.letter_logprobs is None


async def test_openai_http_error_is_recorded_not_raised():
    model = openai_model(lambda r: httpx.Response(500, json={"error": {"message": "boom"}}))
    out = await model.generate(MESSAGES)
    assert not out.ok and "InternalServerError" in out.error and out.text == ""


async def test_openai_refusal_is_an_error():
    body = chat_completion("", None)
    body["choices"][0]["message"].update(content=None, refusal="I can't help with that")
    out = await openai_model(lambda r: httpx.Response(200, json=body)).generate(MESSAGES)
    assert out.error == "refusal: I can't help with that"


def test_usage_ledger_counts_roles():
    ledger = UsageLedger()
    from medfuzz.models import TokenUsage

    ledger.record("target", Generation("A", usage=TokenUsage(10, 1)))
    ledger.record("target", Generation("", error="x", usage=TokenUsage(5, 0)))
    ledger.record("attacker", Generation("plan", usage=TokenUsage(100, 50)))
    assert ledger.as_dict() == {
        "target": {"calls": 2, "errors": 1, "input_tokens": 15, "output_tokens": 1},
        "attacker": {"calls": 1, "errors": 0, "input_tokens": 100, "output_tokens": 50},
    }


# --------------------------------------------------------------------------------------------- Inspect


async def test_inspect_adapter_with_scripted_provider():
    from inspect_ai.model import get_model

    from medfuzz.adapters.inspect_model import InspectChatModel
    from tests.scripted_inspect import SCRIPT

    SCRIPT.clear()
    SCRIPT.extend(["C", RuntimeError("provider down"), "refuse"])
    model = InspectChatModel(get_model("medfuzz-scripted/test"))
    out = await model.generate(MESSAGES, letters="ABCD", seed=1)
    assert out.ok and out.text == "C"
    assert out.letter_logprobs == {"C": pytest.approx(math.log(0.7)), "A": pytest.approx(math.log(0.2))}
    assert out.usage.input_tokens == 2 and out.usage.output_tokens == 1
    failed = await model.generate(MESSAGES)
    assert not failed.ok and "provider down" in failed.error
    refused = await model.generate(MESSAGES)
    assert refused.error == "refusal: content filter"


@pytest.mark.parametrize("logprobs", [False, True])
@pytest.mark.parametrize("model_timeout", [None, 5])
def test_inspect_call_config_equals_the_merged_config(logprobs: bool, model_timeout: int | None):
    """``call_config`` builds in one constructor what ``GenerateConfig.merge`` built before (issue 21): the same
    config, attempt_timeout only when neither the model nor the active config has one."""
    from inspect_ai.model import GenerateConfig, get_model

    from medfuzz.adapters.inspect_model import ATTEMPT_TIMEOUT, call_config
    from medfuzz.models.openai_compat import TOP_LOGPROBS

    model = get_model("mockllm/model", config=GenerateConfig(attempt_timeout=model_timeout))
    merged = GenerateConfig(max_tokens=8, temperature=1.0, seed=7)
    if model_timeout is None:
        merged = merged.merge(GenerateConfig(attempt_timeout=ATTEMPT_TIMEOUT))
    if logprobs:
        merged = merged.merge(GenerateConfig(logprobs=True, top_logprobs=TOP_LOGPROBS))
    assert call_config(model, 8, 1.0, 7, logprobs) == merged


# ---------------------------------------------------------------------------------------------- lm-eval


class FakeLM:
    """Scripted lm-eval LM: records requests, answers generate_until and loglikelihood."""

    def __init__(self, fail: bool = False) -> None:
        self.requests: list = []
        self.fail = fail

    def generate_until(self, requests):
        if self.fail:
            raise RuntimeError("CUDA out of memory")
        self.requests.extend(requests)
        return ["B because"]

    def loglikelihood(self, requests):
        self.requests.extend(requests)
        table = {" A": -2.0, " B": -0.5, " C": -3.0, " D": -4.0}
        return [(table[r.arguments[1]], False) for r in requests]

    def tok_encode(self, text: str) -> list[int]:
        return list(range(len(text.split())))


async def test_lm_eval_adapter_exact_letter_logprobs():
    from medfuzz.adapters.lm_eval_model import LMEvalChatModel

    lm = FakeLM()
    model = LMEvalChatModel(lm, name="fake")
    assert model.apply_chat_template is False
    out = await model.generate(MESSAGES, max_tokens=8, letters="ABCD")
    assert out.text == "B because"
    assert out.letter_logprobs == {"A": -2.0, "B": -0.5, "C": -3.0, "D": -4.0}
    generate_request = lm.requests[0]
    prompt, kwargs = generate_request.arguments
    assert prompt.startswith("System: Be brief.") and prompt.endswith("Assistant:")
    assert kwargs["max_gen_toks"] == 8 and kwargs["do_sample"] is False
    assert out.usage.output_tokens == 2


async def test_lm_eval_adapter_error_is_recorded():
    from medfuzz.adapters.lm_eval_model import LMEvalChatModel

    out = await LMEvalChatModel(FakeLM(fail=True)).generate(MESSAGES)
    assert not out.ok and "CUDA out of memory" in out.error


async def test_scripted_model_replays_and_records():
    from medfuzz.models import ScriptedChatModel

    model = ScriptedChatModel(["A", ValueError("bad"), Generation("B", letter_logprobs={"B": -0.1})])
    first = await model.generate(MESSAGES, letters="AB")
    assert first.text == "A" and first.usage.output_tokens == 1
    assert (await model.generate(MESSAGES)).error == "ValueError: bad"
    assert (await model.generate(MESSAGES)).letter_logprobs == {"B": -0.1}
    assert (await model.generate(MESSAGES)).error == "RuntimeError: scripted model ran out of replies"
    assert model.calls[0].options["letters"] == ["A", "B"] and len(model.calls) == 4
    echo = ScriptedChatModel(responder=lambda messages, options: messages[-1].content.upper())
    assert (await echo.generate([ChatMessage("user", "hi")])).text == "HI"


async def test_openai_calls_in_flight_are_limited_per_endpoint():
    """One limit per endpoint, shared by every model there (a target and an attacker on one server)."""
    in_flight: dict[str, int] = {"a": 0, "b": 0}
    most: dict[str, int] = {"a": 0, "b": 0}

    async def handler(request: httpx.Request) -> httpx.Response:
        host = request.url.host
        in_flight[host] += 1
        most[host] = max(most[host], in_flight[host])
        await asyncio.sleep(0.01)
        in_flight[host] -= 1
        return httpx.Response(200, json=chat_completion("B", None))

    def model(name: str, host: str, limit: int) -> OpenAIChatModel:
        client = httpx.AsyncClient(transport=httpx.MockTransport(handler))
        return OpenAIChatModel(name, base_url=f"http://{host}/v1", api_key="k", max_retries=0, http_client=client,
                               max_connections=limit)

    target, attacker, other = model("t", "a", 3), model("att", "a", 3), model("o", "b", 5)
    replies = await asyncio.gather(*(m.generate(MESSAGES) for m in (target, attacker, other) for _ in range(12)))
    assert all(r.ok for r in replies)
    assert most == {"a": 3, "b": 5}
    with pytest.raises(ValueError, match="max_connections"):
        OpenAIChatModel("m", base_url="http://a/v1", api_key="k", max_connections=0)


async def test_openai_extra_body_is_part_of_the_request():
    seen: list[dict] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(json.loads(request.content))
        return httpx.Response(200, json=chat_completion("B", None))

    client = httpx.AsyncClient(transport=httpx.MockTransport(handler))
    model = OpenAIChatModel("m", base_url="http://test/v1", api_key="k", max_retries=0, http_client=client,
                            extra_body={"top_k": 5})
    assert (await model.generate(MESSAGES, max_tokens=3)).text == "B"
    assert seen[0]["top_k"] == 5 and seen[0]["max_tokens"] == 3 and "extra_body" not in seen[0]


def test_malformed_logprobs_are_dropped_not_a_crash() -> None:
    from medfuzz.models.openai_compat import _positions

    good = {"content": [{"token": "A", "logprob": "-0.5", "top_logprobs": [{"token": "B", "logprob": -1.0}]}]}
    [entry] = _positions(good)
    assert entry.token == "A" and entry.logprob == -0.5 and entry.top == (("B", -1.0),)
    for bad in ({"content": [{"logprob": -0.1}]}, {"content": [{"token": "A", "logprob": None}]},
                {"content": [{"token": "A", "logprob": -0.1, "top_logprobs": [{"token": "B"}]}]},
                {"content": ["A"]}):
        assert _positions(bad) is None
