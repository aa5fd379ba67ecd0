"""Checks ``medfuzz run`` makes before its first paid call: every model it will call answers, with the key it
was given, and the lm-eval half's model arguments make a model lm-eval can build.

One failed check is one line (``PreflightError``) within seconds, instead of a suite that spends minutes
finding out that every call fails the same way. A check costs no model call: an OpenAI-compatible endpoint is
asked for its ``/models`` listing (authenticated, so a wrong key is refused there too); only an endpoint without
that listing gets one request of one token. A hosted provider (Anthropic, Google, Together, ...) gets its SDK
client built as Inspect builds it, with no request: a missing package or key, or a provider Inspect does not know,
is one line before the tasks are built. Other self-hosted providers (vllm, hf, ...) are not checked (building
their client would load the model), and the run says so.
"""

from __future__ import annotations

import json
import os
import urllib.error
import urllib.request
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from medfuzz.options import ConfigError

TIMEOUT = 5.0  # seconds per check request: a live endpoint lists its models in well under a second
NO_CHECK = ("medfuzz-template", "mockllm", "planted-lm")  # providers that call no endpoint at all


class PreflightError(ConfigError):
    """A check before the first paid call failed: the run would fail every call the same way."""


@dataclass(frozen=True)
class Endpoint:
    """An OpenAI-compatible endpoint as Inspect will call it for one model."""

    model: str  # the Inspect model string
    name: str  # the model name sent in requests
    base_url: str
    api_key: str | None
    key_source: str  # where the key comes from (an environment variable's name), for the message


def endpoint_for(model: str, environ: dict[str, str] | None = None) -> Endpoint | None:
    """The endpoint Inspect calls for ``model`` (``openai-api/SERVICE/NAME`` reads ``SERVICE_BASE_URL`` and
    ``SERVICE_API_KEY``; ``openai/NAME`` reads ``OPENAI_BASE_URL`` and ``OPENAI_API_KEY``), or ``None`` for a
    provider this module cannot check cheaply. Raises ``PreflightError`` when a variable Inspect needs is unset."""
    env = os.environ if environ is None else environ
    provider, _, rest = model.partition("/")
    if provider == "openai-api":
        service, _, name = rest.partition("/")
        if not service or not name:
            raise PreflightError(f"--model {model!r}: expected openai-api/SERVICE/MODEL")
        prefix = service.upper().replace("-", "_")
        base_url = env.get(f"{prefix}_BASE_URL")
        if not base_url:
            raise PreflightError(f"{model}: set {prefix}_BASE_URL (and {prefix}_API_KEY) to the endpoint's URL, "
                                 f"e.g. http://host:8000/v1")
        return Endpoint(model, name, base_url.rstrip("/"), env.get(f"{prefix}_API_KEY"), f"{prefix}_API_KEY")
    if provider == "openai" and rest:
        base_url = env.get("OPENAI_BASE_URL") or "https://api.openai.com/v1"
        return Endpoint(model, rest, base_url.rstrip("/"), env.get("OPENAI_API_KEY"), "OPENAI_API_KEY")
    return None


def _request(url: str, key: str | None, body: dict[str, Any] | None = None,
             timeout: float = TIMEOUT) -> tuple[int, Any]:
    """(HTTP status, parsed JSON body or None); raises ``OSError`` (``urllib.error.URLError``) when no HTTP
    answer comes (refused, unknown host, time-out)."""
    headers = {"Content-Type": "application/json", **({"Authorization": f"Bearer {key}"} if key else {})}
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(url, data=data, headers=headers, method="POST" if data else "GET")
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            status, raw = response.status, response.read()
    except urllib.error.HTTPError as err:
        status, raw = err.code, err.read()
    try:
        return status, json.loads(raw) if raw else None
    except ValueError:
        return status, None


def _unreachable(url: str, err: OSError) -> str:
    reason = getattr(err, "reason", err)
    return f"cannot reach {url} ({reason}): is the server running, and is the URL right?"


def check_endpoint(endpoint: Endpoint, timeout: float = TIMEOUT) -> str:
    """One line on what was checked; raises ``PreflightError`` on a refused connection, a refused key (401/403)
    or a model / URL the endpoint does not have (404)."""
    listing = f"{endpoint.base_url}/models"
    try:
        status, body = _request(listing, endpoint.api_key, timeout=timeout)
    except OSError as err:
        raise PreflightError(f"{endpoint.model}: {_unreachable(endpoint.base_url, err)}") from None
    if status in (401, 403):
        raise PreflightError(f"{endpoint.model}: {endpoint.base_url} refused the API key in {endpoint.key_source} "
                             f"(HTTP {status}): set the right key")
    if status in (404, 405):  # no listing: one request of one token says whether URL and model are right
        return _check_by_call(endpoint, timeout)
    if status != 200:
        return f"{endpoint.model}: {listing} answered HTTP {status}; not checked further"
    served = [str(m.get("id")) for m in (body or {}).get("data", []) if isinstance(m, dict)]
    if served and endpoint.name not in served:
        shown = ", ".join(served[:8]) + (", ..." if len(served) > 8 else "")
        raise PreflightError(f"{endpoint.model}: {endpoint.base_url} does not serve {endpoint.name!r} (it lists "
                             f"{shown}): check the model name (an alias the listing omits: --no-preflight)")
    return f"{endpoint.model}: {endpoint.base_url} answers {_key_said(endpoint)}"


def _key_said(endpoint: Endpoint) -> str:
    """What the check showed about the key: accepted, or none was sent (the variable is unset and the endpoint
    answered without one) — never "accepts the key" for a key that does not exist."""
    if endpoint.api_key:
        return f"and accepts the key in {endpoint.key_source}"
    return f"without a key ({endpoint.key_source} is unset; this endpoint asks for none)"


def _check_by_call(endpoint: Endpoint, timeout: float) -> str:
    url = f"{endpoint.base_url}/chat/completions"
    body = {"model": endpoint.name, "messages": [{"role": "user", "content": "A"}], "max_tokens": 1}
    try:
        status, _ = _request(url, endpoint.api_key, body, timeout=timeout)
    except OSError as err:
        raise PreflightError(f"{endpoint.model}: {_unreachable(endpoint.base_url, err)}") from None
    if status in (401, 403):
        raise PreflightError(f"{endpoint.model}: {endpoint.base_url} refused the API key in {endpoint.key_source} "
                             f"(HTTP {status}): set the right key")
    if status == 404:
        raise PreflightError(f"{endpoint.model}: {url} answered 404 (no such endpoint or model): check the base "
                             f"URL (it usually ends in /v1) and the model name")
    return (f"{endpoint.model}: {endpoint.base_url} answers {_key_said(endpoint)} (one 1-token call; it has no "
            "/models listing)")


def check_inspect_models(models: Sequence[str], timeout: float = TIMEOUT) -> list[str]:
    """Every Inspect model of the run (targets and roles), once each: a line per model on what was checked."""
    from medfuzz.cli.suite.plan import SELF_HOSTED

    lines = []
    for model in dict.fromkeys(models):
        provider = model.partition("/")[0]
        if provider in NO_CHECK:
            continue
        endpoint = endpoint_for(model)
        if endpoint is not None:
            lines.append(check_endpoint(endpoint, timeout))
        elif provider not in SELF_HOSTED:
            lines.append(check_client(model))
        else:
            lines.append(f"{model}: not checked before the run (no cheap check for provider {provider!r}; a wrong "
                         "name stops the run at its first call)")
    return lines


def prerequisite_text(err: BaseException) -> str:
    """An Inspect ``PrerequisiteError``'s message as plain text (its rich markup, ``[bold]``..., left out)."""
    import re

    return re.sub(r"\[/?[a-z ]+\]", "", str(getattr(err, "message", err))).strip()


def check_client(model: str) -> str:
    """A hosted provider's client, built as Inspect builds it (its SDK client object: no request, no call): the
    provider exists, its package is installed and its key is set. The key's validity is left to the first call,
    which the run stops at (a configuration failure ends the eval set)."""
    from inspect_ai._util.error import PrerequisiteError
    from inspect_ai.model import get_model

    try:
        get_model(model)
    except PrerequisiteError as err:  # a missing package or key, in Inspect's words
        raise PreflightError(f"{model}: {' '.join(prerequisite_text(err).split())}") from None
    except ValueError as err:  # Inspect's get_model: a provider it does not know
        raise PreflightError(f"{model}: {err} (provider names: https://inspect.aisi.org.uk/providers.html)") \
            from None
    return f"{model}: the provider's client builds (package installed, key set); the key is tried by the first call"


# ------------------------------------------------------------------------------------------------ lm-eval

API_MODELS = ("local-completions", "local-chat-completions", "openai-completions", "openai-chat-completions")


def check_lm_eval(model: str, model_args: str, timeout: float = TIMEOUT) -> list[str]:
    """The lm-eval half's model: a name lm-eval (with medfuzz's models) knows, arguments it can parse, and for
    the API models a reachable ``base_url`` and a tokenizer that loads."""
    from lm_eval.utils import simple_parse_args_string

    from medfuzz.adapters.lm_eval_registry import register_models

    try:
        args = simple_parse_args_string(model_args) if model_args else {}
    except (ValueError, IndexError) as err:
        raise PreflightError(f"--lm-eval {model}:{model_args}: the model arguments do not parse as "
                             f"NAME=VALUE,... ({err})") from None
    register_models()
    import lm_eval.api.registry

    try:
        lm_eval.api.registry.get_model(model)
    except (KeyError, ValueError):
        from medfuzz.options import closest

        known = sorted(lm_eval.api.registry.model_registry.keys())
        close = closest(model, known)
        hint = f" (did you mean {close!r}?)" if close else f" (lm-eval has: {', '.join(known)})"
        raise PreflightError(f"--lm-eval {model!r}: lm-eval has no model of this name{hint}") from None
    if model not in API_MODELS:
        return [f"lm-eval {model}: a model lm-eval knows; its arguments are checked when it loads"]
    return _check_api_model(model, args, timeout)


def _check_api_model(model: str, args: dict[str, Any], timeout: float) -> list[str]:
    base_url = str(args.get("base_url") or "")
    if model.startswith("local-") and not base_url:
        raise PreflightError(f"--lm-eval {model}: base_url=URL is required (e.g. http://host:8000/v1/completions)")
    lines = []
    if base_url:
        parts = urlsplit(base_url)
        root = f"{parts.scheme}://{parts.netloc}"
        try:  # any HTTP answer (a 404 for GET on a POST route too) says the server is there
            _request(root + "/", None, timeout=timeout)
        except OSError as err:
            raise PreflightError(f"--lm-eval {model}: {_unreachable(base_url, err)}") from None
        lines.append(f"lm-eval {model}: {root} answers")
        lines += _served_model(model, base_url, str(args.get("model") or ""), timeout)
    backend = str(args.get("tokenizer_backend", "huggingface"))
    if backend == "remote":
        from lm_eval.utils import RemoteTokenizer

        try:
            RemoteTokenizer(base_url, timeout=int(timeout), max_retries=1)
        except (RuntimeError, OSError) as err:
            raise PreflightError(f"--lm-eval {model}: the server's tokenizer (tokenizer_backend=remote) is not "
                                 f"available: {err}") from None
        lines.append(f"lm-eval {model}: the server's tokenizer answers")
    elif backend == "huggingface":
        name = str(args.get("tokenizer") or args.get("model") or args.get("pretrained") or "")
        lines.append(_check_hf_tokenizer(model, name))
    return lines


def _served_model(model: str, base_url: str, name: str, timeout: float) -> list[str]:
    """The server's ``/v1/models`` listing, when it has one, must list the model lm-eval will ask for."""
    head, sep, _ = base_url.partition("/v1/")
    if not sep or not name:
        return []
    try:
        status, body = _request(f"{head}/v1/models", None, timeout=timeout)
    except OSError:
        return []
    served = [str(m.get("id")) for m in (body or {}).get("data", []) if isinstance(m, dict)] if status == 200 else []
    if served and name not in served:
        raise PreflightError(f"--lm-eval {model}: the server does not serve model={name!r} (it lists "
                             f"{', '.join(served[:8])}): check the model name")
    return [f"lm-eval {model}: the server serves {name}"] if served else []


def _check_hf_tokenizer(model: str, name: str) -> str:
    """The Hugging Face tokenizer lm-eval will load (``tokenizer=`` or the model name): from the local cache or a
    folder first, from the Hub only when the machine is online (huggingface_hub's own offline switch)."""
    if not name:
        raise PreflightError(f"--lm-eval {model}: name the tokenizer (tokenizer=NAME) or use "
                             "tokenizer_backend=remote for a server that serves its own")
    import transformers

    try:
        transformers.AutoTokenizer.from_pretrained(name, local_files_only=True)
        return f"lm-eval {model}: tokenizer {name} loads"
    except (OSError, ValueError):
        pass
    try:
        transformers.AutoTokenizer.from_pretrained(name)
    except (OSError, ValueError) as err:
        first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise PreflightError(f"--lm-eval {model}: the tokenizer {name!r} does not load ({first}); name a Hub "
                             "tokenizer with tokenizer=NAME, or use tokenizer_backend=remote when the server "
                             "serves its own (vLLM, the planted server)") from None
    return f"lm-eval {model}: tokenizer {name} loads"
