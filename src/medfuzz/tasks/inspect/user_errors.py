"""User errors in one line: a ``@task`` that refuses its parameters or its data raises Inspect's
``PrerequisiteError``, which the ``inspect`` CLI prints as its message alone (no 100-line traceback). The
raised exception is still the original class too (``ConfigError``, ``DataError``), with the same text and
fields, so Python callers catch what they always caught."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, TypeVar

from inspect_ai._util.error import PrerequisiteError

from medfuzz.errors import DataError
from medfuzz.options import ConfigError

F = TypeVar("F", bound=Callable[..., Any])
USER_ERRORS = (ConfigError, DataError)


class _Shown(PrerequisiteError):
    def __init__(self, err: BaseException) -> None:
        Exception.__init__(self, str(err))
        self.__dict__.update(err.__dict__)  # DataError's source / row / field
        self.message = f"medfuzz: {err}"


@functools.cache
def _shown_class(kind: type[BaseException]) -> type[BaseException]:
    return type(kind.__name__, (_Shown, kind), {"__module__": kind.__module__})


def shown_in_one_line(err: BaseException) -> BaseException:
    """``err`` as an exception that is both its own class and Inspect's ``PrerequisiteError``."""
    return _shown_class(type(err))(err)


def one_line_user_errors(fn: F) -> F:
    """Wrap a task factory so that its ``ConfigError`` / ``DataError`` reach the ``inspect`` CLI as one line."""
    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except USER_ERRORS as err:
            raise shown_in_one_line(err) from None

    return wrapper  # type: ignore[return-value]
