from __future__ import annotations

from pathlib import Path

import pytest

from medfuzz.paths import write_atomically


def test_write_atomically_replaces_the_file_whole(tmp_path: Path) -> None:
    path = tmp_path / "sub" / "vocab.txt"
    write_atomically(path, lambda stream: stream.write(b"first"))
    write_atomically(path, lambda stream: stream.write(b"second"))
    assert path.read_bytes() == b"second"
    assert [p.name for p in path.parent.iterdir()] == ["vocab.txt"]


def test_a_failed_write_keeps_the_old_file_and_leaves_no_temporary_file(tmp_path: Path) -> None:
    path = tmp_path / "vectors.npy"
    path.write_bytes(b"old")

    def half_then_fail(stream) -> None:
        stream.write(b"half")
        raise OSError("disk full")

    with pytest.raises(OSError, match="disk full"):
        write_atomically(path, half_then_fail)
    assert path.read_bytes() == b"old"
    assert [p.name for p in tmp_path.iterdir()] == ["vectors.npy"]
