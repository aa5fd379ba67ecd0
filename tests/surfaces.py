"""Read back every surface a user reads a number on (``medfuzz run``'s terminal summary, the report's first screen,
``summary.json``, the model-index file(s)) and hold them equal field by field: value, interval ends, k, n, SE.

``summary.json`` is the reference (it holds the numbers unformatted); the terminal and the page must show exactly
the text ``report.format.number`` writes from it, and the model card its rounded value with the same interval and
n, each model in a file of its own that Hugging Face's parser reads as that one model."""

from __future__ import annotations

import json
import math
import os
import re
from pathlib import Path
from typing import Any

from medfuzz.report.format import number
from medfuzz.report.labels import label
from medfuzz.validation.read_back import first_screen_cells

ABSOLUTE = re.compile(r"(?<![\w.:~-])/(?:tmp|home|Users|root|work|var|srv|mnt|private|opt|data)/")


def shown(entry: dict[str, Any]) -> str:
    """A ``summary.json`` number as every surface must write it (``overview.Number.shown``)."""
    if entry.get("text") is not None:
        return entry["text"]
    value = math.nan if entry["value"] is None else entry["value"]
    interval = tuple(math.nan if c is None else c for c in entry["ci95"]) if "ci95" in entry else None
    return number(value, se=entry.get("se"), interval=interval, k=entry.get("k"), n=entry.get("n"))


def terminal_results(text: str) -> dict[tuple[str, str], dict[str, str]]:
    """The terminal summary's results: (harness, title) -> label -> shown text."""
    found: dict[tuple[str, str], dict[str, str]] = {}
    current: dict[str, str] | None = None
    for line in text.splitlines():
        head = re.match(r"^  (Inspect|lm-eval)  (.+?)(?:  \(.*\))?$", line)
        if head:
            key = (head.group(1), head.group(2))
            assert key not in found, f"two results titled {key} on the terminal"
            current = found[key] = {}
            continue
        row = re.match(r"^    (\S.*?)  +(\S.*)$", line)
        if row and current is not None and not line.startswith("    ("):
            current[row.group(1)] = row.group(2)
        elif not line.startswith("    "):
            current = None
    return found


def model_index_files(report: Path) -> dict[str, Path]:
    """Model -> its model-index file (one model per file)."""
    import yaml

    out = {}
    for path in sorted(report.glob("model-index*.yaml")):
        entries = yaml.safe_load(path.read_text(encoding="utf-8"))["model-index"]
        assert len(entries) == 1, f"{path.name}: {len(entries)} models in one model-card block"
        out[entries[0]["name"]] = path
    return out


def assert_surfaces_agree(report: Path, terminal: str | None, models: list[str] | None = None) -> int:
    """Every number of ``summary.json`` (of ``models``, default all) on the page, on the terminal (when given)
    and in the model card, the same; returns how many numbers were compared."""
    import yaml
    from huggingface_hub import ModelCard

    summary = json.loads((report / "summary.json").read_text(encoding="utf-8"))
    assert summary["schema_version"] == 2
    page = (report / "index.html").read_text(encoding="utf-8")
    on_page = first_screen_cells(page)
    on_terminal = terminal_results(terminal) if terminal is not None else None
    cards = model_index_files(report)
    compared = 0
    for model, entry in summary["models"].items():
        if models is not None and model not in models:
            continue
        index = yaml.safe_load(cards[model].read_text(encoding="utf-8"))["model-index"][0]
        metrics = {m["name"]: (r, m) for r in index["results"] for m in r["metrics"]}
        hub = ModelCard("---\n" + cards[model].read_text(encoding="utf-8") + "---\n").data
        assert len(metrics) == sum(len(r["metrics"]) for r in index["results"]), "two metrics of one name"
        assert hub.model_name == model and len(hub.eval_results) == len(metrics), (model, cards[model].name)
        for result in entry["results"]:
            key = (result["harness"], result["title"])
            rows = on_page[(model, *key)]
            terminal_rows = on_terminal[key] if on_terminal is not None else None
            for metric, number_entry in result["numbers"].items():
                words, text = label(metric), shown(number_entry)
                assert number_entry["label"] == words
                assert rows[words] == text, (model, key, words, rows.get(words), text)
                if terminal_rows is not None:
                    assert terminal_rows.get(words) == text, (model, key, words, terminal_rows.get(words), text)
                compared += 1
                card_name = f"{result['title']} ({result['harness']}): {words}"
                if number_entry.get("text") is not None or number_entry["value"] is None:
                    assert card_name not in metrics  # counts in words and missing values stay off the card
                    continue
                dataset, card_metric = metrics[card_name]
                assert card_metric["type"] == metric
                assert card_metric["value"] == round(number_entry["value"], 4)
                args = card_metric.get("args", {})
                assert args.get("ci95") == ([round(c, 4) for c in number_entry["ci95"]]
                                            if "ci95" in number_entry else None), card_name
                assert args.get("stderr") == (round(number_entry["se"], 4) if number_entry.get("se") is not None
                                              else None), card_name
                assert (args.get("k"), args.get("n")) == (number_entry.get("k"), number_entry.get("n")), card_name
                data = result["data"]
                assert dataset["dataset"]["type"] == (data["hub_id"] or dataset["dataset"]["type"])
                if data["hub_id"] is None:  # demo rows, a user's file, MedGuard's build: never a Hub id
                    assert dataset["dataset"]["type"].startswith("medfuzz:"), dataset
                assert dataset["dataset"].get("split") == data["split"]
                unit = "docs" if "docs" in data else "items"  # lm-eval's own table counts docs
                assert dataset["dataset"].get("args") == ({unit: data[unit]} if data.get(unit) is not None else None)
        for found in hub.eval_results:  # what Hugging Face's own parser reads
            assert found.dataset_type.startswith("medfuzz:") or "/" in found.dataset_type
    return compared


def assert_no_absolute_path(report: Path, roots: list[Path]) -> None:
    """No file of the report names an absolute path (users share the folder): no folder of ``roots`` in any text
    file (the page, ``summary.json``, the CSV, JSON, Markdown and YAML tables), no string in a JSON file that is an
    absolute path, nothing that looks like one on the page."""
    page = (report / "index.html").read_text(encoding="utf-8")
    text = (report / "summary.json").read_text(encoding="utf-8")
    files = [p for p in report.rglob("*") if p.suffix in (".html", ".json", ".csv", ".md", ".yaml")]
    for file in files:
        content = file.read_text(encoding="utf-8")
        for root in roots:
            for variant in {str(root), str(root.resolve())}:
                assert variant not in content, (file.name, variant)
    for file in (p for p in files if p.suffix == ".json"):
        found = [s for s in _strings(json.loads(file.read_text(encoding="utf-8"))) if os.path.isabs(s)]
        assert not found, (file.name, found)

    absolute = [s for s in _strings(json.loads(text)) if os.path.isabs(s) or ABSOLUTE.search(s)]
    assert not absolute, absolute
    assert not ABSOLUTE.search(page.replace("http://www.w3.org", "")), ABSOLUTE.search(page)


def _strings(value: Any) -> list[str]:
    if isinstance(value, dict):
        return [s for v in value.values() for s in _strings(v)]
    if isinstance(value, list):
        return [s for v in value for s in _strings(v)]
    return [value] if isinstance(value, str) else []
