"""``medfuzz report``: plots and tables from Inspect logs and lm-eval results.

Each method contributes a module here with ``render(log_paths, out_dir) -> list[Path]`` that picks out the
logs it understands and ignores the rest; ``render_all`` runs every one that is installed, then writes
``index.html`` (``medfuzz.report.index``): one self-contained page over every run and every file written, with
``summary.json`` and ``model-index.yaml`` (``medfuzz.report.overview``) beside it. Every log is parsed once
(``medfuzz.report._logs.read_once``), however many renderers look at it. The logs of a run split into shards
(``medfuzz run --shard K/N``) are merged into that one run first (``medfuzz.report.shards``).
"""

from __future__ import annotations

import importlib
from pathlib import Path

RENDERERS = {  # the page's section key -> the module that renders it
    "medfuzz": "medfuzz.report.medfuzz", "tces": "medfuzz.report.tces",
    "sweep": "medfuzz.tasks.tces_studies.sweep_report", "medguard": "medfuzz.report.medguard",
    "compare": "medfuzz.report.compare",
}


def collect_logs(paths: list[Path]) -> list[Path]:
    """Inspect ``.eval``/``.json`` logs and lm-eval ``results_*.json`` files under the given paths."""
    found: list[Path] = []
    for path in paths:
        if path.is_file():
            found.append(path)
            continue
        if not path.is_dir():
            raise FileNotFoundError(f"{path}: no such log file or folder")
        found += sorted(path.rglob("*.eval"))
        found += sorted(p for p in path.rglob("*.json") if not p.name.startswith("samples_"))
    return found


def render_all(paths: list[Path], out_dir: Path) -> dict[str, list[Path]]:
    logs = collect_logs(paths)  # first: a missing input stops the command before it creates any folder
    out_dir.mkdir(parents=True, exist_ok=True)
    written: dict[str, list[Path]] = {}
    from medfuzz.report._logs import read_once

    with read_once():  # every renderer below gets the same parsed logs (each file parsed once)
        from medfuzz.report.shards import merge_shards

        logs = merge_shards(logs, out_dir)  # shards of one run become that run, before any statistic
        for key, name in RENDERERS.items():
            try:
                module = importlib.import_module(name)
            except ModuleNotFoundError as err:
                if err.name == name:  # that method's reporting is not part of this installation
                    continue
                raise
            written[key] = module.render(logs, out_dir)
        from medfuzz.report.index import write_index

        index = write_index(logs, out_dir, written)
    if index is not None:  # the page's machine-readable twins first; the page last: the CLI prints it last
        from medfuzz.report.overview import MODEL_INDEX, SUMMARY

        written["index"] = [out_dir / SUMMARY, out_dir / MODEL_INDEX, index]
    return written
