"""What a failed model call means, in one place for every backend and task.

Three kinds of failure (docs/foundation.md, "Failure policy"):

- *transient* (429, 5xx, a hung or dropped connection, a body that is not JSON): retried with back-off by the
  client or the harness; what survives the retries is an LLM error of that call;
- *model-side* (empty content, a refusal, an unparseable reply): the engine retries the step a bounded number of
  times with a new seed, then records an LLM error for the unit;
- *configuration* (401 wrong key, 403 no access, 404 unknown model or endpoint, and an unreachable server: the
  connection refused or the host name unknown once the client's own retries are spent): every call of the run
  would fail the same way, so the run stops at once with that reason (``ModelConfigError``) instead of
  finishing with every unit an LLM error.

Replies are stored capped (``cap_reply``) so one runaway reply cannot blow up logs and caches.
"""

from __future__ import annotations

import contextlib
import logging
import os
import socket
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from medfuzz.errors import MedfuzzError

# HTTP statuses that say the run is misconfigured, not that one call was unlucky
CONFIG_STATUSES = {
    401: "authentication failed (wrong or missing API key)",
    403: "permission denied for this model or endpoint",
    404: "model or endpoint not found (check the model name and base URL)",
}

MAX_REPLY_CHARS = 20_000
"""Longest reply text kept (about 5,000 tokens, more than any budget the engines ask for)."""

MAX_ERROR_CHARS = 500


class ModelConfigError(MedfuzzError, RuntimeError):
    """A model call failed for a reason every other call shares (401/403/404): the run stops with it."""


def status_code(err: BaseException) -> int | None:
    """The HTTP status of a client exception (openai, httpx and most provider SDKs), if it carries one."""
    for candidate in (err, getattr(err, "response", None)):
        code = getattr(candidate, "status_code", None)
        if isinstance(code, int):
            return code
    return None


def redact(text: str, secrets: tuple[str | None, ...] = ()) -> str:
    """``text`` with every secret (API keys) replaced, so no message we keep or raise can leak one."""
    for secret in secrets:
        if secret and len(secret) >= 4:
            text = text.replace(secret, "[redacted]")
    return text


# a name whose value is a secret: one of these parts (split at "_" and "-"), or one of the token names; a name
# ending in "_env" holds the *name* of a variable (api_key_env), not its value
SECRET_PARTS = frozenset({"key", "apikey", "secret", "password", "passwd", "credential", "credentials",
                          "authorization", "bearer", "header", "headers", "cookie"})
SECRET_TOKENS = frozenset({"token", "auth_token", "access_token", "api_token", "hf_token", "bearer_token",
                           "session_token", "refresh_token", "id_token"})
MIN_SECRET_CHARS = 8  # shorter values ("1", "none") would redact ordinary text


def secret_name(name: str) -> bool:
    """Whether an option or environment variable of this name carries a secret (a key, token, password or auth
    header): ``api_key``, ``OPENAI_API_KEY``, ``auth_token``, ``HF_TOKEN``, ``header``; not ``api_key_env``,
    ``add_bos_token`` or ``tokenizer``."""
    lowered = name.lower().replace("-", "_")
    if lowered.endswith("_env"):
        return False
    parts = lowered.split("_")
    return lowered in SECRET_TOKENS or "_".join(parts[-2:]) in SECRET_TOKENS or bool(SECRET_PARTS & set(parts))


def environment_secrets(environ: Mapping[str, str] | None = None) -> tuple[str, ...]:
    """The values of the environment variables whose names say they are secrets (``OPENAI_API_KEY``, ...)."""
    environ = os.environ if environ is None else environ
    return tuple(sorted({value for name, value in environ.items()
                         if secret_name(name) and len(value) >= MIN_SECRET_CHARS}))


def redact_log_records(secrets: Iterable[str]) -> None:
    """Redact ``secrets`` from every log record this process creates from now on (message and traceback), at
    creation, so every handler (console, files a harness adds later) gets the redacted text. For a harness whose
    own logs may carry a key: lm-eval logs the raw body of a failed API request ("Response text: ...") and
    its model arguments, before any medfuzz hook runs."""
    kept = tuple(s for s in secrets if s and len(s) >= MIN_SECRET_CHARS)
    if not kept:
        return
    make: Callable[..., logging.LogRecord] = logging.getLogRecordFactory()

    def redacted(*args: Any, **kwargs: Any) -> logging.LogRecord:
        record = make(*args, **kwargs)
        message = record.getMessage()
        if any(secret in message for secret in kept):
            record.msg, record.args = redact(message, kept), ()
        if record.exc_info and record.exc_info[1] is not None:
            redact_exception(record.exc_info[1], kept)
        return record

    logging.setLogRecordFactory(redacted)


def redact_value(value: Any, secrets: tuple[str | None, ...]) -> Any:
    """``value`` with every string inside it (dicts, lists, tuples: a provider's JSON error body) redacted."""
    if isinstance(value, str):
        return redact(value, secrets)
    if isinstance(value, dict):
        return {key: redact_value(item, secrets) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return type(value)(redact_value(item, secrets) for item in value)
    return value


def redact_exception(err: BaseException, secrets: tuple[str | None, ...]) -> BaseException:
    """``err`` and every exception in its chain of causes, redacted *in place* (so a re-raise keeps its type,
    status code and traceback for the harness's retry and failure logic): the message arguments, and the
    ``message`` / ``body`` attributes the openai SDK's errors carry (``str(err)`` is built from the arguments;
    Inspect records ``err.message``). A provider that echoes the API key in an error body (some do on 401) then
    puts it into no log: the harness writes the exception text to its trace log, the model event and the sample
    error before any code of ours sees it, so this must run where the provider raises."""
    seen: set[int] = set()
    current: BaseException | None = err
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        current.args = redact_value(current.args, secrets)
        for name in ("message", "body"):
            if isinstance(getattr(current, name, None), str | dict | list):
                with contextlib.suppress(AttributeError):  # read-only: its text comes from what we redacted
                    setattr(current, name, redact_value(getattr(current, name), secrets))
        current = _cause(current)
    return err


def describe(err: BaseException, secrets: tuple[str | None, ...] = ()) -> str:
    """``"ExceptionName: message"``, plus ``" (caused by Root: message)"`` when the chain of causes ends in an
    exception of another type (the SDK reports "Connection error." or, through its aiohttp transport, even
    "Request timed out." for a refused connection; the root says what happened); secrets redacted, capped at
    ``MAX_ERROR_CHARS``."""
    text = f"{type(err).__name__}: {err}"
    root, seen = err, {id(err)}
    while (nxt := _cause(root)) is not None and id(nxt) not in seen:
        root = nxt
        seen.add(id(root))
    if root is not err and type(root) is not type(err):
        text += f" (caused by {type(root).__name__}: {root})"
    return redact(text, secrets)[:MAX_ERROR_CHARS]


def _cause(err: BaseException) -> BaseException | None:
    """The exception behind ``err``: ``raise ... from x``, else the implicit context, even where a library
    suppressed it for display (httpx hides the ``ConnectionRefusedError`` behind "All connection attempts
    failed"): this text is for diagnosis."""
    return err.__cause__ if err.__cause__ is not None else err.__context__


def unreachable(err: BaseException) -> str | None:
    """Why the server cannot be reached at all, when the chain of causes says so (``None`` otherwise): a refused
    connection (nothing listens at the base URL) or a host name that does not resolve. A dropped or reset
    connection, a time-out or a 5xx is not this: those are transient and retried."""
    cause: BaseException | None = err
    seen: set[int] = set()
    while cause is not None and id(cause) not in seen:
        seen.add(id(cause))
        if isinstance(cause, ConnectionRefusedError):
            return "connection refused: nothing is listening at the base URL (is the server running, on that port?)"
        if isinstance(cause, socket.gaierror):
            return "the server's host name does not resolve (check the base URL)"
        cause = _cause(cause)
    return None


def config_failure(err: BaseException, secrets: tuple[str | None, ...] = ()) -> ModelConfigError | None:
    """The ``ModelConfigError`` to stop the run with when ``err`` is a configuration failure, else ``None``."""
    code = status_code(err)
    if code not in CONFIG_STATUSES:
        reason = unreachable(err)
        if reason is None:
            return None
        return ModelConfigError(f"model call failed: cannot reach the model server ({reason}); every call would "
                                f"fail the same way, so the run stops. {describe(err, secrets)}")
    return ModelConfigError(f"model call failed: {CONFIG_STATUSES[code]} (HTTP {code}); "
                            f"every call would fail the same way, so the run stops. {describe(err, secrets)}")


def known_secrets(extra: Iterable[str | None] = ()) -> tuple[str, ...]:
    """Every secret medfuzz knows here: the environment's secret-named variables and ``extra`` (a model's key)."""
    return (*environment_secrets(), *(s for s in extra if s and len(s) >= MIN_SECRET_CHARS))


def cap_reply(text: str, secrets: Iterable[str | None] = ()) -> str:
    """The reply text as stored: every known secret redacted (an endpoint may echo the key inside a 200 reply,
    and medfuzz quotes replies in its own messages, records and pages), at most ``MAX_REPLY_CHARS`` characters."""
    text = redact(text, known_secrets(secrets))
    return text if len(text) <= MAX_REPLY_CHARS else text[:MAX_REPLY_CHARS]


def reply_excerpt(text: str, chars: int = 200, secrets: Iterable[str | None] = ()) -> str:
    """A reply quoted in a medfuzz message (``repr`` of its first ``chars`` characters, stripped), secrets
    redacted: what "unparseable answer: ..." and the scorers' explanations show."""
    return repr(redact(text.strip(), known_secrets(secrets))[:chars])
