"""A disk cache of model calls, so a resumed or repeated run never pays twice for a call that completed.

The engines send every call with a seed, so a call is determined by (model identity, messages, max tokens,
temperature, seed, answer letters asked for): that tuple, hashed, is the key. Inspect models use Inspect's own
cache (``CachePolicy``, set by ``adapters.inspect_model``); every other ``ChatModel`` (the OpenAI-compatible
adapter, the lm-eval attack path) is wrapped in ``CachedChatModel``, which keeps one small JSON file per call
under ``$MEDFUZZ_CACHE/calls`` (written to a temporary name and renamed, so a kill never leaves a torn entry).

Only completed replies are stored: a call that failed (HTTP error, time-out, refusal reported by the API,
authentication) is never cached, so fixing the cause and running again asks again.

``MEDFUZZ_CALL_CACHE`` controls both caches: unset → on, entries expire after a week (``1W``); an expiry such
as ``12h``, ``3D``, ``2W`` (units s, m, h, D, W, M, Y as in Inspect); ``never`` → no expiry; ``off`` → no cache.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import time
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

from medfuzz.errors import MedfuzzError
from medfuzz.models.protocol import ChatMessage, ChatModel, Generation, TokenUsage
from medfuzz.paths import cache_dir, write_atomically

ENV = "MEDFUZZ_CALL_CACHE"
DEFAULT_EXPIRY = "1W"
_OFF = {"off", "0", "false", "no"}
_NEVER = {"never", "none"}
_UNITS = {"s": 1, "m": 60, "h": 3600, "D": 86_400, "W": 604_800, "M": 2_592_000, "Y": 31_536_000}
_DISABLED = object()


def _setting() -> object:
    """``_DISABLED``, ``None`` (never expires) or an expiry string, from ``MEDFUZZ_CALL_CACHE``."""
    raw = os.environ.get(ENV, "").strip()
    if not raw:
        return DEFAULT_EXPIRY
    if raw.lower() in _OFF:
        return _DISABLED
    if raw.lower() in _NEVER:
        return None
    expiry_seconds(raw)  # check it now: a typo must not silently turn the cache off
    return raw


def enabled() -> bool:
    return _setting() is not _DISABLED


def expiry() -> str | None:
    """The expiry string (``None``: never); only meaningful when ``enabled()``."""
    setting = _setting()
    return None if setting is _DISABLED else setting  # type: ignore[return-value]


def expiry_seconds(text: str) -> int:
    match = re.fullmatch(r"(\d+)\s*([smhDWMY])", text.strip())
    if not match:
        raise MedfuzzError(f"{ENV}={text!r}: use off, never, or an expiry such as 12h, 3D, 1W (units s m h D W M Y)")
    return int(match.group(1)) * _UNITS[match.group(2)]


def call_key(identity: str, messages: Sequence[ChatMessage], max_tokens: int, temperature: float | None,
             seed: int | None, letters: Sequence[str] | None) -> str:
    """SHA-256 of everything that determines a reply (never the API key)."""
    payload = {"model": identity, "messages": [[m.role, m.content] for m in messages], "max_tokens": max_tokens,
               "temperature": temperature, "seed": seed, "letters": list(letters) if letters else None}
    return hashlib.sha256(json.dumps(payload, sort_keys=True, ensure_ascii=False).encode()).hexdigest()


class CallCache:
    """One JSON file per completed call: ``<folder>/<key[:2]>/<key>.json``."""

    def __init__(self, folder: str | Path | None = None, expiry: str | None = DEFAULT_EXPIRY) -> None:
        self.folder = Path(folder) if folder else cache_dir() / "calls"
        self.ttl = expiry_seconds(expiry) if expiry else None

    def _path(self, key: str) -> Path:
        return self.folder / key[:2] / f"{key}.json"

    def get(self, key: str) -> Generation | None:
        path = self._path(key)
        try:
            entry = json.loads(path.read_text(encoding="utf-8"))
            if entry["expires"] is not None and entry["expires"] < time.time():
                path.unlink(missing_ok=True)
                return None
            g = entry["generation"]
            return Generation(text=g["text"], letter_logprobs=g["letter_logprobs"],
                              usage=TokenUsage(**g["usage"]), model=g["model"])
        except FileNotFoundError:
            return None
        except (OSError, ValueError, KeyError, TypeError):  # unreadable entry: ask the model again
            return None

    def put(self, key: str, generation: Generation) -> None:
        if not generation.ok:  # failures are facts about the call, not the prompt: never cached
            return
        path = self._path(key)
        path.parent.mkdir(parents=True, exist_ok=True)
        entry = {"expires": time.time() + self.ttl if self.ttl else None,
                 "generation": {"text": generation.text, "letter_logprobs": generation.letter_logprobs,
                                "usage": asdict(generation.usage), "model": generation.model}}
        data = json.dumps(entry, ensure_ascii=False).encode("utf-8")
        write_atomically(path, lambda out: out.write(data))  # a reader sees the whole entry or none


class CachedChatModel:
    """A ``ChatModel`` that answers repeated calls from a ``CallCache`` (see the module docstring)."""

    def __init__(self, model: ChatModel, cache: CallCache | None = None, identity: str | None = None) -> None:
        self.model = model
        self.name = model.name
        self.cache = cache or CallCache(expiry=expiry())
        self.identity = identity or str(getattr(model, "identity", model.name))
        self.hits = 0

    async def generate(self, messages: Sequence[ChatMessage], *, max_tokens: int = 512,
                       temperature: float | None = None, seed: int | None = None,
                       letters: Sequence[str] | None = None) -> Generation:
        key = call_key(self.identity, messages, max_tokens, temperature, seed, letters)
        cached = self.cache.get(key)
        if cached is not None:
            self.hits += 1
            return cached
        reply = await self.model.generate(messages, max_tokens=max_tokens, temperature=temperature, seed=seed,
                                          letters=letters)
        self.cache.put(key, reply)
        return reply


def cached(model: ChatModel, **kwargs: Any) -> ChatModel:
    """``model`` behind the call cache, or ``model`` itself when ``MEDFUZZ_CALL_CACHE=off``."""
    return CachedChatModel(model, **kwargs) if enabled() else model
