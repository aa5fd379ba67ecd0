"""The engine-side model adapters against the real embedded model server."""

from __future__ import annotations

import math

import pytest

from medfuzz.benchmarks import load_items
from medfuzz.benchmarks.prompts import format_question
from medfuzz.models import ChatMessage
from medfuzz.models.local import LOCAL_API_KEY, MODEL_ALIAS, LocalServer
from medfuzz.models.openai_compat import OpenAIChatModel

pytestmark = pytest.mark.e2e


def letter_prompt() -> list[ChatMessage]:
    item = load_items("medqa", "demo", limit=1)[0]
    return [ChatMessage("user", f"{format_question(item)}\n\nAnswer with the letter of the correct option only.")]


async def test_openai_adapter_gets_letter_logprobs(local_server: LocalServer):
    model = OpenAIChatModel(MODEL_ALIAS, base_url=local_server.base_url, api_key=LOCAL_API_KEY)
    out = await model.generate(letter_prompt(), max_tokens=4, temperature=0.0, seed=0, letters="ABCD")
    assert out.ok, out.error
    assert out.usage.input_tokens > 50 and out.usage.output_tokens >= 1
    assert out.letter_logprobs, f"no letter logprobs for reply {out.text!r}"
    assert all(value <= 0 for value in out.letter_logprobs.values())
    assert sum(math.exp(v) for v in out.letter_logprobs.values()) <= 1.0 + 1e-6
    # greedy decoding: the chosen letter is the most likely one
    assert out.text.strip()[0] == max(out.letter_logprobs, key=out.letter_logprobs.get)


async def test_openai_adapter_stops_on_an_unreachable_server():
    from medfuzz.models.failures import ModelConfigError

    model = OpenAIChatModel(MODEL_ALIAS, base_url="http://127.0.0.1:9/v1", api_key="x", max_retries=0, timeout=5)
    with pytest.raises(ModelConfigError, match="ConnectionRefusedError"):
        await model.generate(letter_prompt(), max_tokens=4)


async def test_inspect_adapter_against_local_server(local_server: LocalServer, monkeypatch):
    from inspect_ai.model import get_model

    from medfuzz.adapters.inspect_model import InspectChatModel

    for key, value in local_server.inspect_env().items():
        monkeypatch.setenv(key, value)
    model = InspectChatModel(get_model(local_server.inspect_model))
    out = await model.generate(letter_prompt(), max_tokens=4, temperature=0.0, letters="ABCD")
    assert out.ok, out.error
    assert out.letter_logprobs and out.usage.input_tokens > 50


@pytest.fixture(scope="module")
def llama_lm():
    pytest.importorskip("llama_cpp", reason="the embedded model needs the 'local' extra")
    import lm_eval.models  # noqa: F401  (lm-eval's registry first, then ours)

    from medfuzz.adapters.llama_cpp_lm import LlamaCppLM

    return LlamaCppLM()


def test_medfuzz_local_loglikelihood_is_aligned_with_the_server(llama_lm, local_server: LocalServer):
    """Our in-process loglikelihood of a next token equals the server's (non-echo) top logprobs for it."""
    from lm_eval.api.instance import Instance
    from openai import OpenAI

    context = "The heart pumps blood through the"  # raw completions of SmolLM2 may start with EOS; this one does not
    client = OpenAI(base_url=local_server.base_url, api_key=LOCAL_API_KEY)
    reply = client.completions.create(model=MODEL_ALIAS, prompt=context, max_tokens=1, logprobs=5, temperature=0)
    top = {token: float(value) for token, value in reply.choices[0].logprobs.top_logprobs[0].items()}
    requests = [Instance("loglikelihood", {}, (context, token), i) for i, token in enumerate(top)]
    ours = llama_lm.loglikelihood(requests)
    for (token, expected), (value, _) in zip(top.items(), ours, strict=True):
        assert value == pytest.approx(expected, abs=1e-3), token
    assert ours[0][1] is True and not any(greedy for _, greedy in ours[1:])


def test_medfuzz_local_multi_token_continuation_and_cache(llama_lm):
    from lm_eval.api.instance import Instance

    context = "The capital of France is"
    single = llama_lm.loglikelihood([Instance("loglikelihood", {}, (context, " Paris"), 0)])[0][0]
    first, rest = llama_lm.loglikelihood([
        Instance("loglikelihood", {}, (context, " Paris, the city"), 0),
        Instance("loglikelihood", {}, (context + " Paris", ", the city"), 1),
    ])
    # chain rule: log p(" Paris, the city") = log p(" Paris") + log p(", the city" | ... Paris)
    assert first[0] == pytest.approx(single + rest[0], abs=1e-3)
    assert first[0] < single < 0


async def test_lm_eval_adapter_exact_letters_in_process(llama_lm):
    from medfuzz.adapters.lm_eval_model import LMEvalChatModel

    model = LMEvalChatModel(llama_lm, name="medfuzz-local")
    assert model.apply_chat_template is False  # no HF tokenizer attribute: plain transcript prompt
    out = await model.generate(letter_prompt(), max_tokens=4, letters="ABCD")
    assert out.ok, out.error
    assert set(out.letter_logprobs) == set("ABCD")  # exact: every letter, no top-k cut-off
    assert 0.0 < sum(math.exp(v) for v in out.letter_logprobs.values()) <= 1.0 + 1e-6
    assert out.usage.input_tokens > 50
