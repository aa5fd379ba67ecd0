"""Fixtures for the known-truth checks: the planted spec, its items and the planted server on 127.0.0.1."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from medfuzz.benchmarks import load_items
from medfuzz.benchmarks.items import MCQItem
from medfuzz.planted import PlantedSpec
from medfuzz.planted.server import PlantedServer, launch


@pytest.fixture(scope="session")
def planted_spec() -> PlantedSpec:
    return PlantedSpec.load()


@pytest.fixture(scope="session")
def demo_items() -> list[MCQItem]:
    return load_items("medqa", "demo")


@pytest.fixture(scope="session")
def planted_server(planted_spec: PlantedSpec, demo_items: list[MCQItem]) -> Iterator[PlantedServer]:
    """The planted target and attacker served over HTTP for the whole session (a background thread)."""
    server = launch(planted_spec, demo_items)
    try:
        yield server
    finally:
        server.stop()
