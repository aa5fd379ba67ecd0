from __future__ import annotations

from pathlib import Path

import pytest

FIXTURES = Path(__file__).parent / "fixtures"
SHARED = Path(__file__).resolve().parents[1].parent / "shared"


@pytest.fixture(autouse=True)
def _no_call_cache(monkeypatch: pytest.MonkeyPatch) -> None:
    """The model-call cache is off in tests unless a test turns it on with its own folders: a reply cached by
    one test (or an earlier session) must not answer another's scripted call."""
    monkeypatch.setenv("MEDFUZZ_CALL_CACHE", "off")


@pytest.fixture
def fixtures() -> Path:
    return FIXTURES


@pytest.fixture
def shared_data() -> Path:
    data = SHARED / "data"
    if not data.is_dir():
        pytest.skip(f"../shared/data is absent ({data}); this test reads the shared benchmark files")
    return data
