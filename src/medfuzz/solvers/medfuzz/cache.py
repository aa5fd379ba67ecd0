"""An in-run request cache: identical requests to one model are paid once.

Two requests are identical when they go to the same model object with the same messages and the same
sampling settings (max tokens, temperature, seed, answer letters). With a seed, a backend gives (or aims
to give) the same reply to the same request, so replaying it changes nothing but the bill. Concurrent
identical requests share one call (the later ones await the first). Failed replies are not kept, so a
retry after an error reaches the model again.

Where it pays: control fuzzes whose text the attacker repeats, and any p-hat question asked twice with
the same draw (the p-hat of the original item is shared explicitly, see ``engine``).
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from medfuzz.models.protocol import ChatMessage, ChatModel, Generation


class RequestCache:
    """Per-run memo of model replies keyed by (model, messages, sampling settings)."""

    def __init__(self) -> None:
        self._replies: dict[tuple[Any, ...], asyncio.Future[Generation]] = {}
        self.hits: Counter[str] = Counter()  # served from the cache, per role

    @staticmethod
    def key(model: ChatModel, messages: Sequence[ChatMessage], max_tokens: int, temperature: float | None,
            seed: int | None, letters: Sequence[str] | None) -> tuple[Any, ...]:
        return (id(model), tuple(messages), max_tokens, temperature, seed, tuple(letters) if letters else None)

    async def get(self, key: tuple[Any, ...], role: str,
                  call: Callable[[], Awaitable[Generation]]) -> tuple[Generation, bool]:
        """The reply for ``key`` and whether it came from the cache (``call`` makes it otherwise)."""
        pending = self._replies.get(key)
        if pending is not None:
            reply = await asyncio.shield(pending)
            if reply.ok:
                self.hits[role] += 1
                return reply, True
        future: asyncio.Future[Generation] = asyncio.get_running_loop().create_future()
        self._replies[key] = future
        try:
            reply = await call()
        except BaseException as err:
            self._replies.pop(key, None)
            future.set_exception(err)
            future.exception()  # mark retrieved: waiters re-raise it, nobody else needs to
            raise
        future.set_result(reply)
        if not reply.ok:
            self._replies.pop(key, None)
        return reply, False
