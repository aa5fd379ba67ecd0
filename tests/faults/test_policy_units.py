"""The failure policy's pieces, offline and fast: the call cache, configuration failures, redaction, the reply
cap, the Inspect guard around plain ``generate()``, the lm-eval attack path's key handling and torn cache lines,
and spreadsheet-safe CSV cells."""

from __future__ import annotations

import json
import logging
import time
from pathlib import Path

import httpx
import pytest

from medfuzz.errors import DataError
from medfuzz.models import ChatMessage, Generation, ScriptedChatModel
from medfuzz.models.call_cache import CachedChatModel, CallCache, call_key, expiry_seconds
from medfuzz.models.failures import MAX_REPLY_CHARS, ModelConfigError, config_failure
from medfuzz.models.openai_compat import OpenAIChatModel
from medfuzz.options import ConfigError
from medfuzz.report.format import safe_cell

MESSAGES = [ChatMessage("user", "Question? A. x B. y")]
SECRET = "sk-canary-0123456789abcdef"


# ------------------------------------------------------------------------------------------- call cache


async def test_cached_model_answers_repeats_from_disk_and_never_caches_failures(tmp_path: Path) -> None:
    inner = ScriptedChatModel(["B", RuntimeError("HTTP 503"), "A"])
    model = CachedChatModel(inner, CallCache(tmp_path))
    first = await model.generate(MESSAGES, seed=1, letters="AB")
    again = await model.generate(MESSAGES, seed=1, letters="AB")
    assert first.text == again.text == "B" and len(inner.calls) == 1 and model.hits == 1
    failed = await model.generate(MESSAGES, seed=2)  # a failure is not stored ...
    assert not failed.ok
    retried = await model.generate(MESSAGES, seed=2)  # ... so the same call asks the model again
    assert retried.text == "A" and len(inner.calls) == 3
    # a fresh process (a new wrapper over the same folder) finds both completed calls
    other = ScriptedChatModel([])
    reopened = CachedChatModel(other, CallCache(tmp_path))
    assert (await reopened.generate(MESSAGES, seed=1, letters="AB")).text == "B" and other.calls == []


def test_cache_key_covers_what_determines_the_reply() -> None:
    base = call_key("url|m", MESSAGES, 10, 0.0, 1, "AB")
    assert base == call_key("url|m", MESSAGES, 10, 0.0, 1, "AB")
    assert len({base, call_key("url|m2", MESSAGES, 10, 0.0, 1, "AB"), call_key("url|m", MESSAGES, 11, 0.0, 1, "AB"),
                call_key("url|m", MESSAGES, 10, 1.0, 1, "AB"), call_key("url|m", MESSAGES, 10, 0.0, 2, "AB"),
                call_key("url|m", MESSAGES, 10, 0.0, 1, None),
                call_key("url|m", [ChatMessage("user", "other")], 10, 0.0, 1, "AB")}) == 7


def test_expired_entries_are_dropped(tmp_path: Path) -> None:
    cache = CallCache(tmp_path, expiry="1s")
    cache.put("ab" * 32, Generation(text="A"))
    assert cache.get("ab" * 32).text == "A"
    time.sleep(1.2)
    assert cache.get("ab" * 32) is None and not list(tmp_path.rglob("*.json"))
    assert expiry_seconds("2W") == 14 * 86_400
    with pytest.raises(Exception, match="MEDFUZZ_CALL_CACHE"):
        expiry_seconds("forever")


def test_the_cache_switch(monkeypatch: pytest.MonkeyPatch) -> None:
    from medfuzz.models import call_cache

    monkeypatch.setenv("MEDFUZZ_CALL_CACHE", "off")
    assert not call_cache.enabled() and call_cache.cached(ScriptedChatModel([])).__class__ is ScriptedChatModel
    monkeypatch.setenv("MEDFUZZ_CALL_CACHE", "12h")
    assert call_cache.enabled() and call_cache.expiry() == "12h"
    monkeypatch.delenv("MEDFUZZ_CALL_CACHE")
    assert call_cache.expiry() == "1W"


# ------------------------------------------------------------------------------- the OpenAI-compatible client


def _client(handler) -> OpenAIChatModel:
    transport = httpx.AsyncClient(transport=httpx.MockTransport(handler))
    return OpenAIChatModel("m", base_url="http://test/v1", api_key=SECRET, max_retries=0, http_client=transport)


@pytest.mark.parametrize("status", [401, 403, 404])
async def test_configuration_failures_stop_the_run(status: int) -> None:
    body = {"error": {"message": f"Incorrect API key provided: {SECRET}", "type": "invalid_request_error"}}
    model = _client(lambda request: httpx.Response(status, json=body))
    with pytest.raises(ModelConfigError, match=f"HTTP {status}") as err:
        await model.generate(MESSAGES)
    assert SECRET not in str(err.value)


def test_unreachable_is_the_cause_chain_not_any_connection_error() -> None:
    from medfuzz.models.failures import config_failure, unreachable

    refused = httpx.ConnectError("All connection attempts failed")
    refused.__context__ = ConnectionRefusedError(111, "Connection refused")
    assert unreachable(refused) and isinstance(config_failure(refused), ModelConfigError)
    reset = httpx.ReadError("peer closed")
    reset.__context__ = ConnectionResetError(104, "Connection reset by peer")  # a dropped call: transient
    assert unreachable(reset) is None and config_failure(reset) is None
    assert config_failure(httpx.ReadTimeout("timed out")) is None


def test_baseline_stops_when_the_server_is_unreachable(tmp_path: Path) -> None:
    from inspect_ai import eval as inspect_eval

    from medfuzz.tasks.inspect.baselines import medqa_clean
    from tests.scripted_inspect import SCRIPT

    refused = httpx.ConnectError("All connection attempts failed")
    refused.__cause__ = ConnectionRefusedError(111, "Connection refused")
    SCRIPT[:] = [refused]
    log = inspect_eval(medqa_clean(data="demo", limit=1), model="medfuzz-scripted/x", log_dir=str(tmp_path),
                       display="none")[0]
    assert log.status == "error" and "cannot reach the model server" in log.error.message


async def test_other_failures_are_recorded_with_the_key_redacted() -> None:
    body = {"error": {"message": f"upstream failed for key {SECRET}", "type": "server_error"}}
    out = await _client(lambda request: httpx.Response(500, json=body)).generate(MESSAGES)
    assert not out.ok and "500" in out.error and SECRET not in out.error and "[redacted]" in out.error


async def test_huge_replies_are_capped() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, json={"id": "x", "object": "chat.completion", "created": 0, "model": "m",
                                         "choices": [{"index": 0, "finish_reason": "stop", "message": {
                                             "role": "assistant", "content": "B " + "x" * 3_000_000}}]})

    out = await _client(handler).generate(MESSAGES)
    assert out.ok and out.text.startswith("B ") and len(out.text) == MAX_REPLY_CHARS


async def test_a_refused_connection_stops_the_run_named_by_its_root_cause() -> None:
    # the SDK says "Connection error." (through its aiohttp transport even "Request timed out."); the root
    # cause at the end of the exception chain says what happened, and nothing listening means every call of
    # the run would fail the same way: the run stops (like 401/404) instead of recording LLM errors
    import socket

    import openai

    with socket.socket() as probe:  # a port nothing listens on: bind, read the number, close
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    for http_client in (None, "aiohttp"):
        client = openai.DefaultAioHttpClient() if http_client else None
        model = OpenAIChatModel("m", base_url=f"http://127.0.0.1:{port}/v1", api_key=SECRET, max_retries=0,
                                http_client=client)
        with pytest.raises(ModelConfigError, match=r"cannot reach the model server \(connection refused") as err:
            await model.generate(MESSAGES)
        assert "(caused by ConnectionRefusedError: " in str(err.value) and SECRET not in str(err.value)
        await model._client.close()


def _echoed_401(key: str) -> Exception:
    """What the openai SDK raises for a 401 whose body echoes the key (as some providers do), with a cause."""
    import openai

    body = {"error": {"message": f"Incorrect API key provided: {key}", "type": "invalid_request_error"}}
    response = httpx.Response(401, json=body, request=httpx.Request("POST", "http://test/v1/chat/completions"))
    err = openai.AuthenticationError(f"Error code: 401 - {body}", response=response, body=body["error"])
    err.__cause__ = httpx.HTTPStatusError(f"401 for key {key}", request=response.request, response=response)
    return err


def test_an_exception_is_redacted_in_place_keeping_what_the_harness_reads() -> None:
    from medfuzz.models.failures import redact_exception

    err = _echoed_401(SECRET)
    assert redact_exception(err, (SECRET, None)) is err
    for text in (str(err), err.message, repr(err.body), str(err.__cause__), repr(err)):
        assert SECRET not in text and "[redacted]" in text, text
    assert err.status_code == 401 and config_failure(err) is not None  # still a configuration failure
    assert str(redact_exception(ValueError(("nested", {"k": [SECRET]})), (SECRET,))) == \
        "('nested', {'k': ['[redacted]']})"


def test_log_records_are_redacted_at_creation_messages_and_tracebacks(caplog) -> None:
    from medfuzz.models.failures import environment_secrets, redact_log_records

    assert environment_secrets({"OPENAI_API_KEY": SECRET, "HF_TOKEN": "hf-0123456789", "API_KEY_ENV": "MY_KEY",
                                "SHORT_KEY": "abc", "PATH": "/usr/bin"}) == ("hf-0123456789", SECRET)
    factory = logging.getLogRecordFactory()
    try:
        redact_log_records([SECRET, "short"])
        log = logging.getLogger("lm_eval.models.api_models")
        with caplog.at_level(logging.WARNING):
            log.warning("API request failed! Response text: %s. Retrying...", f'{{"key": "{SECRET}"}}')
            try:
                raise _echoed_401(SECRET)
            except Exception:
                log.exception("failed")
    finally:
        logging.setLogRecordFactory(factory)
    assert caplog.records and SECRET not in caplog.text and "[redacted]" in caplog.text
    assert "Response text: {\"key\": \"[redacted]\"}" in caplog.text and "AuthenticationError" in caplog.text


async def test_inspect_provider_errors_carry_no_key_where_inspect_logs_them() -> None:
    """Through Inspect's openai-api provider against a 401 that echoes the key: the exception Inspect records
    (``Model.generate`` writes it to the trace log and the model event) has the key redacted, and is still the
    SDK's 401 that stops the run."""
    import openai
    from inspect_ai.model import get_model

    from medfuzz.adapters.inspect_model import redact_provider_errors
    from tests.faults.server import FaultServer, Schedule

    with FaultServer(Schedule(kind="auth_echo")) as server:
        model = redact_provider_errors(get_model(server.inspect_model, base_url=server.base_url, api_key=SECRET))
        assert redact_provider_errors(model).api.generate is model.api.generate  # wrapped once
        with pytest.raises(openai.AuthenticationError) as err:
            await model.generate("Question? A. x B. y")
        assert server.stats.authorization == [f"Bearer {SECRET}"]  # the key was sent, and echoed
    assert SECRET not in str(err.value) and SECRET not in repr(err.value.body) and "[redacted]" in str(err.value)


async def test_provider_replies_carrying_an_error_are_redacted_too() -> None:
    """A provider may return its error (an exception, or a reply with ``error`` set) with the raw exchange
    instead of raising: Inspect logs both, so both are redacted; a good reply is returned untouched."""
    from types import SimpleNamespace

    from inspect_ai.model import ModelCall, ModelOutput

    from medfuzz.adapters.inspect_model import redact_provider_errors

    replies = [(ModelOutput(model="m", error=f"rejected key {SECRET}"), ModelCall(request={"model": "m"},
                response={"error": {"message": f"key {SECRET}"}})), (_echoed_401(SECRET), None),
               ModelOutput.from_content("m", f"text that happens to hold {SECRET}")]

    async def generate(**kwargs: object) -> object:
        return replies.pop(0)

    model = redact_provider_errors(SimpleNamespace(api=SimpleNamespace(api_key=SECRET, generate=generate)))
    output, call = await model.api.generate(input=[])
    assert output.error == "rejected key [redacted]" and call.response == {"error": {"message": "key [redacted]"}}
    error, _ = await model.api.generate(input=[])
    assert SECRET not in str(error) and error.status_code == 401
    assert SECRET in (await model.api.generate(input=[])).completion  # a reply is the model's, not redacted


def test_describe_names_the_root_cause_once_and_only_when_it_differs() -> None:
    from medfuzz.models.failures import describe

    try:
        try:
            raise ConnectionResetError("peer reset")
        except ConnectionResetError as inner:
            raise RuntimeError(f"wrapped, key {SECRET}") from inner
    except RuntimeError as outer:
        text = describe(outer, (SECRET,))
    assert text == "RuntimeError: wrapped, key [redacted] (caused by ConnectionResetError: peer reset)"
    assert describe(ValueError("plain")) == "ValueError: plain"
    try:
        try:
            raise KeyError("internal")
        except KeyError:
            raise ValueError("clean") from None  # hidden from tracebacks, still what happened
    except ValueError as suppressed:
        assert describe(suppressed) == "ValueError: clean (caused by KeyError: 'internal')"


# ------------------------------------------------------------------------- Inspect guard around generate()


def test_baseline_retries_what_escapes_generate_then_records_an_llm_error(tmp_path: Path) -> None:
    from inspect_ai import eval as inspect_eval

    from medfuzz.tasks.inspect import failure_policy
    from medfuzz.tasks.inspect.baselines import medqa_clean
    from tests.scripted_inspect import SCRIPT

    bad_body = json.JSONDecodeError("Unterminated string", "{", 1)
    # sample 1: one truncated body, then the answer; sample 2: never an answer (3 tries); sample 3: empty, answer
    SCRIPT[:] = [bad_body, "ANSWER: C", bad_body, bad_body, bad_body, "", "ANSWER: D"]
    assert failure_policy.BACKOFF < 1  # the guard waits the test's back-off (tests/conftest.py), not 2 s, 4 s
    log = inspect_eval(medqa_clean(data="demo", limit=3), model="medfuzz-scripted/x", log_dir=str(tmp_path),
                       display="none", max_samples=1)[0]
    assert log.status == "success" and SCRIPT == []
    scores = [s.scores["baseline_choice"] for s in log.samples]
    assert [s.value for s in scores] == ["C", "N", "C"]
    assert scores[1].metadata["llm_error"].startswith("JSONDecodeError")
    metrics = {name: m.value for name, m in log.results.scores[0].metrics.items()}
    assert metrics == {"baseline_acc": 1.0, "baseline_stderr": 0.0, "baseline_llm_errors": 1.0,
                       "baseline_llm_error_rate": pytest.approx(1 / 3)}


def test_baseline_stops_on_a_configuration_failure(tmp_path: Path) -> None:
    from inspect_ai import eval as inspect_eval

    from medfuzz.tasks.inspect.baselines import medqa_clean
    from tests.scripted_inspect import SCRIPT

    denied = httpx.HTTPStatusError("401 Unauthorized", request=httpx.Request("POST", "http://x"),
                                   response=httpx.Response(401))
    SCRIPT[:] = [denied]
    log = inspect_eval(medqa_clean(data="demo", limit=1), model="medfuzz-scripted/x", log_dir=str(tmp_path),
                       display="none")[0]
    assert log.status == "error" and "HTTP 401" in log.error.message


# -------------------------------------------------------------------------------- the lm-eval attack path


def test_a_raw_api_key_in_metadata_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    from medfuzz.tasks.lm_eval.medfuzz import api_key, medfuzz_docs

    for route in ({"api_key": SECRET}, {"medfuzz_api_key": SECRET}):  # what lm-eval's hook receives
        with pytest.raises(ConfigError, match="api_key_env") as err:
            medfuzz_docs("medqa", target_base_url="http://127.0.0.1:9/v1", data="demo", **route)
        assert SECRET not in str(err.value)
    with pytest.raises(ConfigError, match="MY_KEY"):
        api_key({"api_key_env": "MY_KEY"})
    monkeypatch.setenv("MY_KEY", SECRET)
    assert api_key({"api_key_env": "MY_KEY"}) == SECRET


def test_a_torn_last_line_of_the_attack_cache_is_dropped(tmp_path: Path, caplog) -> None:
    from medfuzz.tasks.lm_eval.medfuzz import read_attack_cache

    path = tmp_path / "medqa-x.jsonl"
    good = [json.dumps({"item": {"id": str(i)}}) for i in range(2)]
    path.write_text("\n".join(good) + "\n" + good[0][:9])
    with caplog.at_level(logging.WARNING):
        assert [r["item"]["id"] for r in read_attack_cache(path)] == ["0", "1"]
    assert "row 3: dropped a torn last record" in caplog.text
    assert path.read_text() == "\n".join(good) + "\n"  # cut off, so the next append starts a fresh line
    path.write_text(good[0] + "\n{oops\n" + good[1] + "\n")
    with pytest.raises(DataError, match="row 2"):
        read_attack_cache(path)


# ------------------------------------------------------------------------------------------ CSV cells


@pytest.mark.parametrize(("value", "written"), [
    ("=HYPERLINK(\"http://x\",\"click\")", "'=HYPERLINK(\"http://x\",\"click\")"),
    ("+1 more", "'+1 more"), ("-sign", "'-sign"), ("@SUM(A1)", "'@SUM(A1)"), ("\tx", "'\tx"), ("\rx", "'\rx"),
    ("-0.25", "-0.25"), ("+3", "+3"), (-0.25, -0.25), ("plain = text", "plain = text"), (None, None),
])
def test_csv_cells_are_neutralised(value, written) -> None:
    assert safe_cell(value) == written
