"""``medfuzz sweep tces`` end to end: the real CLI, Inspect's eval_set and openai-api provider against the planted
target server, a tiny grid; a second call reuses every run, the printed ``inspect eval-set`` line finds the same
run, and ``medfuzz report`` draws the sweep figures."""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest

from medfuzz.planted.server import serve
from tests.e2e.conftest import cli, run_cli

pytestmark = pytest.mark.e2e


def test_sweep_cli_resumes_and_reports(tmp_path: Path, fixtures: Path) -> None:
    logs, out = tmp_path / "logs", tmp_path / "report"
    tces = fixtures / "tces"
    with serve() as server:
        # temperature 1: the planted target then samples its answer, so some substitutions flip it
        command = [cli("medfuzz"), "sweep", "tces", "--model", server.inspect_model(), "--log-dir", str(logs),
                   "--name", "e2e", "--data", "demo", "--limit", "3", "--n-grid", "-20,20", "--zoo-m", "2",
                   "--entity", "drugs,diseases", "--vocabulary", f"drugs={tces / 'drugs_drugcentral.csv'}",
                   "--vocabulary", f"diseases={tces / 'diseases_ctd.csv'}", "-T", "budget=2", "-T", "temperature=1",
                   "--display", "none"]
        first = run_cli(command, env=server.inspect_env())
        assert "6/6 runs finished (0 found finished in the folder and reused, 6 run now)" in first
        made = {p.name: p.stat().st_mtime for p in logs.glob("*.eval")}
        assert len(made) == 6

        again = run_cli(command, env=server.inspect_env())
        assert "6/6 runs finished (6 found finished in the folder and reused, 0 run now)" in again
        assert {p.name: p.stat().st_mtime for p in logs.glob("*.eval")} == made

        # the documented Inspect CLI equivalent of one grid point finds that point's finished run
        lines = run_cli([*command, "--print-commands"]).strip().splitlines()
        assert len(lines) == 6 and lines[0].startswith("inspect eval-set medfuzz/tces ")
        words = shlex.split(lines[0])
        run_cli([cli("inspect"), *words[1:]], env=server.inspect_env())
        assert {p.name: p.stat().st_mtime for p in logs.glob("*.eval")} == made

    report = run_cli([cli("medfuzz"), "report", str(logs), "--out", str(out)])
    for name in ("tces_sweep_n_e2e_medqa_openai-api-planted-planted_B2.png",
                 "tces_sweep_zoo_e2e_medqa_openai-api-planted-planted_B2.png", "tces_sweep.md", "index.html"):
        assert (out / name).is_file(), report
    table = (out / "tces_sweep.md").read_text()
    assert table.count("| drugs |") == 3 and table.count("| diseases |") == 3
    assert "TCES sweeps" in (out / "index.html").read_text()
