"""Bad task parameters stop a run before its first call, with one message naming the parameter, through the real
entry points of both harnesses (the Inspect ``@task`` and the lm-eval ``custom_dataset`` hook)."""

from __future__ import annotations

import pytest

from medfuzz.options import ConfigError

BAD = [("turns", "-1", "turns must be at least 1"), ("replicates", "0", "replicates must be at least 1"),
       ("min_kept", "2", "min_kept must be between 0 and 1"), ("turns", "abc", "turns='abc' is not an integer")]


@pytest.mark.parametrize(("name", "value", "message"), BAD)
def test_inspect_medfuzz_task_rejects(name: str, value: str, message: str) -> None:
    from medfuzz.tasks.inspect.medfuzz import medfuzz_medqa

    with pytest.raises(ConfigError, match=message):
        medfuzz_medqa(data="demo", **{name: value})  # -T values arrive as text


@pytest.mark.parametrize(("name", "value", "message"), BAD)
def test_lm_eval_medfuzz_hook_rejects(name: str, value: str, message: str) -> None:
    from medfuzz.tasks.lm_eval.medfuzz import medfuzz_docs

    with pytest.raises(ConfigError, match=message):  # before any endpoint is contacted (port 9 is closed)
        medfuzz_docs("medqa", target_base_url="http://127.0.0.1:9/v1", data="demo", **{name: value})


def test_tces_retries_are_checked() -> None:
    from medfuzz.tasks.inspect.tces import tces_medqa

    with pytest.raises(ConfigError, match="max_retries must be 0 or more"):
        tces_medqa(data="demo", max_retries="-1")
