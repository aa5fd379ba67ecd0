from __future__ import annotations

from pathlib import Path

import pytest

from medfuzz.cli import main
from medfuzz.tasks import LM_EVAL_TASKS_PATH


def test_tasks_path_prints_the_yaml_folder(capsys):
    assert main(["tasks-path"]) == 0
    printed = Path(capsys.readouterr().out.strip())
    assert printed == LM_EVAL_TASKS_PATH and (printed / "baselines" / "medqa_clean.yaml").is_file()


def test_lm_eval_wrapper_adds_our_folder_before_user_paths(tmp_path, monkeypatch):
    import lm_eval.tasks

    from medfuzz.cli import lm_eval as lm_eval_cli

    monkeypatch.setattr(lm_eval.tasks, "TaskManager", lm_eval.tasks.TaskManager)  # restored after the test
    user = tmp_path / "mine"
    user.mkdir()
    (user / "medqa_clean.yaml").write_text(
        "task: medqa_clean\ndataset_path: json\ndataset_kwargs:\n  data_files:\n    test: x.jsonl\n"
        "output_type: multiple_choice\ntest_split: test\ndoc_to_text: q\ndoc_to_choice: [A, B]\ndoc_to_target: 0\n"
    )
    lm_eval_cli._install_task_path()
    manager = lm_eval.tasks.TaskManager(include_path=str(user))
    assert {"medqa_clean", "medqa_clean_generate", "medmcqa_clean", "medmcqa_clean_generate"} <= set(manager.all_tasks)
    # the user's task of the same name wins, as with plain lm_eval
    assert Path(manager._index["medqa_clean"].yaml_path).parent == user
    lm_eval_cli._install_task_path()  # idempotent: no double wrapping
    assert lm_eval.tasks.TaskManager._medfuzz_wrapped
    plain = lm_eval.tasks.TaskManager()
    assert Path(plain._index["medqa_clean"].yaml_path).parent == LM_EVAL_TASKS_PATH / "baselines"


def test_lm_eval_samples_are_read_per_task_not_by_prefix(tmp_path):
    import json

    from medfuzz.report.runs import read_lm_eval_output

    run = tmp_path / "model"
    run.mkdir()
    (run / "results_2026-01-01T00-00-00.json").write_text(json.dumps({"results": {
        "medqa_clean": {"acc,none": 0.5, "acc_stderr,none": 0.5},
        "medqa_clean_generate": {"exact_match,none": 0.0}}}))
    (run / "samples_medqa_clean_2026-01-01T00-00-00.jsonl").write_text(
        "\n".join(json.dumps({"doc": {"id": f"q{i}"}, "acc": float(i)}) for i in (0, 1)))
    (run / "samples_medqa_clean_generate_2026-01-01T00-00-00.jsonl").write_text(
        json.dumps({"doc": {"id": "q9"}, "exact_match": 0.0}))
    summary = read_lm_eval_output(tmp_path, "medqa_clean")
    assert summary.per_item == {"q0": False, "q1": True}
    assert summary.reported == summary.recomputed == 0.5 and summary.stderr == 0.5


def test_report_finds_nothing_in_a_baseline_only_folder(tmp_path, capsys):
    (tmp_path / "logs").mkdir()
    assert main(["report", str(tmp_path / "logs"), "--out", str(tmp_path / "out")]) == 1
    assert "no MedFuzz, TCES or MedGuard results" in capsys.readouterr().err  # a problem: on stderr


def test_report_rejects_a_missing_path(tmp_path):
    import pytest

    with pytest.raises(SystemExit, match=r"medfuzz report: .*absent: no such log file or folder"):  # one line
        main(["report", str(tmp_path / "absent"), "--out", str(tmp_path / "out")])
    assert not (tmp_path / "out").exists()  # a refused command leaves no empty report folder behind


def test_version_names_medfuzz_and_the_harnesses(capsys):
    from importlib.metadata import version

    with pytest.raises(SystemExit) as done:
        main(["--version"])
    assert done.value.code == 0
    assert capsys.readouterr().out.strip() == (f"medfuzz {version('medfuzz')} (inspect-ai {version('inspect-ai')}, "
                                               f"lm-eval {version('lm-eval')})")


def test_methods_errors_name_each_method_with_a_suggestion(tmp_path):
    from medfuzz.cli.suite.plan import SuitePlan
    from medfuzz.options import ConfigError

    with pytest.raises(ConfigError) as err:
        SuitePlan(model="openai/gpt-4o", out=tmp_path, methods=("basline", "tces", "foo"))
    assert str(err.value) == ("--methods: 'basline' is not a method (did you mean 'baseline'?); 'foo' is not a "
                              "method (choose from baseline, tces, medguard, medfuzz)")
    with pytest.raises(ConfigError, match=r"^--methods names no method; choose from baseline, tces"):
        SuitePlan(model="openai/gpt-4o", out=tmp_path, methods=())
