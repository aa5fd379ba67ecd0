"""The files ``medfuzz report`` wrote into its folder, so that a new render leaves none of an earlier one behind.

Every render records the files it wrote in ``DIR/.medfuzz-report.json`` (paths relative to ``DIR``, with size and
modification time). The next render into ``DIR`` removes the files of that list that it did not write again, and
nothing else: files a user put into the folder are never touched, nor a file of the list that changed since
medfuzz wrote it (a review sheet filled in place is the user's now), nor any file the render read as its input (a
merged shard log given back to ``medfuzz report``). What a render wrote is what its writers returned (every
renderer returns each file it writes) and the merged shard logs; the folder is never scanned for changes, since
``DIR`` may be a folder that other programs write into at the same time (a home folder). The page itself
(``index.html``, ``summary.json``, the ``model-index*.yaml`` files) is removed when a render starts: a render that is
interrupted leaves no page rather than the previous run's page over new files.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from pathlib import Path

MANIFEST = ".medfuzz-report.json"
PAGE_FILES = ("index.html", "summary.json", "model-index.yaml")
_PAGE_MARK = b"<title>medfuzz report</title>"  # a page from before the manifest: its index.html says it is ours

def previous_files(out_dir: Path) -> list[Path]:
    """The files the last render into ``out_dir`` wrote that are still as it left them (only paths inside
    ``out_dir``; a file changed since, by a user, is not medfuzz's to remove)."""
    try:
        data = json.loads((out_dir / MANIFEST).read_text(encoding="utf-8"))
        recorded = {str(entry["path"]): (int(entry["mtime_ns"]), int(entry["size"])) for entry in data["files"]}
    except (OSError, ValueError, KeyError, TypeError):  # no manifest yet, or not ours: nothing is known
        return []
    root = out_dir.resolve()
    found = []
    for name, stamp in recorded.items():
        path = (root / name).resolve()
        if path.is_relative_to(root) and path != root and _stamp(path) == stamp:
            found.append(path)
    return found


def _stamp(path: Path) -> tuple[int, int] | None:
    try:
        stat = path.stat()
    except OSError:
        return None
    return stat.st_mtime_ns, stat.st_size


def forget_page(out_dir: Path, previous: list[Path]) -> None:
    """Remove the previous render's page before this one starts (see the module docstring)."""
    out_dir = out_dir.resolve()
    legacy = not (out_dir / MANIFEST).exists() and _is_our_page(out_dir / PAGE_FILES[0])
    for name in PAGE_FILES:
        path = out_dir / name
        if path in previous or (legacy and name == PAGE_FILES[0]):
            path.unlink(missing_ok=True)
    for path in previous:  # the model-index files of a report of several models: one per model
        if path.parent == out_dir and path.name.startswith("model-index.") and path.suffix == ".yaml":
            path.unlink(missing_ok=True)


def _is_our_page(path: Path) -> bool:
    try:
        with path.open("rb") as stream:
            return _PAGE_MARK in stream.read(4096)
    except OSError:
        return False


def settle(out_dir: Path, written: Iterable[Path], inputs: Iterable[Path], previous: list[Path]) -> list[Path]:
    """Record what this render wrote and remove what the previous one wrote and this one did not; returns the
    files removed."""
    out_dir = out_dir.resolve()
    now = {Path(p).resolve() for p in written if Path(p).is_file()}
    kept_inputs = {Path(p).resolve() for p in inputs}
    removed, carried = [], set()
    for path in previous:
        if path in now or not path.is_file():
            continue
        if path in kept_inputs:  # read by this render: still ours, never removed while it is input
            carried.add(path)
            continue
        path.unlink()
        removed.append(path)
        _remove_empty_parents(path.parent, out_dir)
    entries = [{"path": str(p.relative_to(out_dir)), "mtime_ns": stamp[0], "size": stamp[1]}
               for p in sorted(now | carried) if p.is_relative_to(out_dir) and (stamp := _stamp(p)) is not None]
    write_text_atomically(out_dir / MANIFEST, json.dumps(
        {"format": "medfuzz report files, version 1", "files": entries}, indent=1))
    return removed


def write_text_atomically(path: Path, text: str) -> None:
    """``path`` replaced whole (a reader sees the old file or the new one, never half of one), with the
    permissions of any file the user creates (``paths.write_atomically``'s mkstemp would make the page 0600,
    unreadable to a web server or a colleague)."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def _remove_empty_parents(folder: Path, out_dir: Path) -> None:
    while folder != out_dir and folder.is_relative_to(out_dir):
        try:
            folder.rmdir()
        except OSError:  # not empty
            return
        folder = folder.parent
