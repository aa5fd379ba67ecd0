"""``medfuzz report`` always lands and refuses to mix: a section that raises is an error in its place (the rest
is written), an unreadable log, a missing shard and shards of two configurations are named on the console with
exit 1, MedGuard logs of different settings are never pooled, a new render leaves nothing of an earlier one, and
the page shows no absolute path. Tiny logs from the scripted Inspect model (a few seconds in all)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from medfuzz.cli import main as medfuzz_main

pytest.importorskip("matplotlib")


def _baseline(folder: Path, limit: int = 2, **options) -> Path:
    from inspect_ai import eval as inspect_eval

    from medfuzz.tasks.inspect.baselines import medqa_clean
    from tests.scripted_inspect import SCRIPT

    SCRIPT[:] = ["ANSWER: C", "ANSWER: B", "ANSWER: D", "ANSWER: A"][:limit]
    [log] = inspect_eval(medqa_clean(data="demo", limit=limit, **options), model="medfuzz-scripted/x",
                         log_dir=str(folder), display="none")
    return Path(log.location)


def _medguard(folder: Path, task: str = "medguard", **options) -> Path:
    from inspect_ai import eval as inspect_eval

    from medfuzz.tasks.inspect import medguard
    from tests.scripted_inspect import SCRIPT

    SCRIPT[:] = ["ANSWER: A"] * 50
    [log] = inspect_eval(getattr(medguard, task)(limit_per_aspect=4, **options), model="medfuzz-scripted/always-a",
                         log_dir=str(folder), display="none")
    SCRIPT.clear()
    return Path(log.location)


@pytest.fixture(scope="module")
def logs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("lands")
    return {"baseline": _baseline(folder / "runs"),
            "seed0": _medguard(folder / "runs", aspects="defense,sycophancy"),
            "seed1": _medguard(folder / "runs", aspects="defense,sycophancy", seed=1),
            "defense": _medguard(folder / "aspects", "medguard_defense"),
            "sycophancy": _medguard(folder / "aspects", "medguard_sycophancy")}


def _report(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, list[str]]:
    code = medfuzz_main(["report", *args])
    return code, [line for line in capsys.readouterr().err.splitlines() if line.startswith("medfuzz report:")]


def _page(out: Path) -> str:
    return (out / "index.html").read_text(encoding="utf-8")


# ------------------------------------------------------------------------------------ always lands


def test_a_section_that_raises_is_an_error_in_its_place_and_the_rest_is_written(
        logs: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    import medfuzz.report.medguard

    def broken(paths: list[Path], out_dir: Path) -> list[Path]:
        raise ValueError("'yerr' must not contain negative values")

    monkeypatch.setattr(medfuzz.report.medguard, "render", broken)
    out = tmp_path / "report"
    code, lines = _report(capsys, str(logs["baseline"]), str(logs["seed0"]), "--out", str(out))
    assert code == 1
    assert lines[0] == "medfuzz report: MedGuard: failed: ValueError: 'yerr' must not contain negative values"
    assert lines[-1].startswith("medfuzz report: 1 problem(s) above; the page lists them:") and len(lines) == 2
    page = _page(out)
    medguard = page[page.index("<section id=medguard>"):]
    medguard = medguard[:medguard.index("</section>")]
    assert "This part of the report could not be drawn: ValueError: &#x27;yerr&#x27; must not contain negative " \
           "values" in medguard
    assert "MedGuard (failed)" in page and "Traceback" not in page and 'File "' not in page
    assert "<div id=problems class=problems><h2>Problems (1)</h2>" in page
    # everything else is there: the baseline's section, the MedGuard run card, the first screen's numbers
    assert "<section id=baseline>" in page and "medguard · medfuzz-scripted/always-a" in medguard
    summary = json.loads((out / "summary.json").read_text(encoding="utf-8"))
    assert "medfuzz-scripted/always-a" in summary["models"]
    assert (out / "model-index.medfuzz-scripted_always-a.yaml").is_file()  # two models: one file each


def test_render_all_returns_the_files_as_before_and_the_problems(
        logs: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    import medfuzz.report.tces
    from medfuzz.report import render_all

    monkeypatch.setattr(medfuzz.report.tces, "render", lambda paths, out: 1 / 0)
    done = render_all([logs["baseline"], logs["seed0"]], tmp_path / "report", echo=False)
    assert capsys.readouterr().err == ""  # echo off: the caller prints
    assert [(p.where, p.message) for p in done.problems] == [
        ("TCES", "failed: ZeroDivisionError: division by zero")]
    assert isinstance(done, dict) and "tces" not in done and done.written == dict(done)  # old callers' dict
    # the page's twins (two models: a model-index file each), the page last
    assert [p.name for p in done["index"]] == ["summary.json", "model-index.medfuzz-scripted_x.yaml",
                                               "model-index.medfuzz-scripted_always-a.yaml", "index.html"]
    assert done.index == tmp_path / "report" / "index.html"
    assert "TCES (failed)" in _page(tmp_path / "report")  # a failed section is shown even with no TCES run


@pytest.mark.parametrize("broken", ["medfuzz.report.overview.build", "medfuzz.report.index._card_html",
                                    "medfuzz.report.index.write_index"])
def test_the_page_lands_when_a_part_of_the_page_itself_raises(
        broken: str, logs: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    def fail(*args, **kwargs):
        raise RuntimeError("planted failure")

    monkeypatch.setattr(broken, fail)
    out = tmp_path / "report"
    code, lines = _report(capsys, str(logs["baseline"]), "--out", str(out))
    assert code == 1 and any("RuntimeError: planted failure" in line for line in lines), lines
    page = _page(out)
    assert "RuntimeError: planted failure" in page and "Traceback" not in page
    if broken.endswith("write_index"):  # the plain page: the problem and a link to every file written
        assert "<h2>Files written</h2>" in page
    else:
        assert "<section id=baseline>" in page and (out / "summary.json").is_file()


# ------------------------------------------------------------------------------------ refuses to mix


def test_an_unreadable_log_is_named_without_its_folder_and_exits_1(
        logs: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    folder = tmp_path / "logs"
    folder.mkdir()
    (folder / "good.eval").write_bytes(logs["baseline"].read_bytes())
    (folder / "broken.eval").write_bytes(logs["baseline"].read_bytes()[:300])  # truncated mid-write
    out = tmp_path / "report"
    code, lines = _report(capsys, str(folder), "--out", str(out))
    assert code == 1
    assert lines[0].startswith("medfuzz report: ../logs/broken.eval: not readable as an Inspect log (")
    assert lines[0].endswith("); left out of every number") and str(tmp_path) not in lines[0]
    page = _page(out)
    assert "../logs/broken.eval: not readable as an Inspect log" in page and "Clean baselines (1 run)" in page


def test_out_naming_a_file_is_one_line(tmp_path: Path, logs: dict[str, Path]) -> None:
    taken = tmp_path / "report.txt"
    taken.write_text("mine")
    for command in ("report", "compare"):
        with pytest.raises(SystemExit, match=rf"^medfuzz {command}: --out .*report\.txt is a file; name a folder"):
            medfuzz_main([command, str(logs["baseline"]), "--out", str(taken)])
    assert taken.read_text() == "mine"


def test_compare_names_an_unreadable_log_and_exits_1(logs: dict[str, Path], tmp_path: Path,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    broken = tmp_path / "broken.eval"
    broken.write_bytes(b"not a zip")
    code = medfuzz_main(["compare", str(logs["seed0"]), str(broken), "--out", str(tmp_path / "out")])
    captured = capsys.readouterr()
    assert code == 1 and "Safety indices" in captured.out  # the comparison is still printed and written
    assert captured.err.startswith("medfuzz compare: ../broken.eval: not readable as an Inspect log (")


def _shards(folder: Path, tasks: list) -> list[Path]:
    from inspect_ai import eval as inspect_eval

    from medfuzz.tasks.inspect.shards import shard_task
    from tests.scripted_inspect import SCRIPT

    paths = []
    for k, task in tasks:
        SCRIPT[:] = ["ANSWER: C", "ANSWER: B"]
        [log] = inspect_eval(shard_task(task, k, 2), model="medfuzz-scripted/x", log_dir=str(folder / str(k)),
                             display="none")
        paths.append(Path(log.location))
    return paths


def test_a_missing_shard_is_named_on_the_console_and_exits_1(tmp_path: Path,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    from medfuzz.tasks.inspect.baselines import medqa_clean

    [first] = _shards(tmp_path / "shards", [(1, medqa_clean(data="demo", limit=4))])
    out = tmp_path / "report"
    code, lines = _report(capsys, str(first), "--out", str(out))
    assert code == 1
    assert re.fullmatch(r"medfuzz report: merged-shards/[^ /]+\.eval: shards of this run, merged: 1 shard log\(s\) "
                        r"of 2; missing or unfinished: samples 2-3 \(no shard log covers them\)\. Run the missing "
                        r"shards \(medfuzz run --shard K/N\) and report again\.", lines[0]), lines
    assert "<div id=problems class=problems><h2>Problems (1)</h2>" in _page(out)
    # the merged log is the report's own file: recorded, and removed by a render that no longer merges it
    listed = [entry["path"] for entry in json.loads((out / ".medfuzz-report.json").read_text())["files"]]
    assert any(name.startswith("merged-shards/") for name in listed)
    _baseline(tmp_path / "other")
    assert _report(capsys, str(tmp_path / "other"), "--out", str(out))[0] == 0
    assert not (out / "merged-shards").exists()


def test_shards_of_two_configurations_are_never_merged_and_exit_1(tmp_path: Path,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    from medfuzz.tasks.inspect.baselines import medqa_clean

    paths = _shards(tmp_path / "shards", [(1, medqa_clean(data="demo", limit=4)),
                                          (2, medqa_clean(data="demo", limit=4, seed=1))])
    out = tmp_path / "report"
    code, lines = _report(capsys, *map(str, paths), "--out", str(out))
    assert code == 1
    assert lines[0] == ("medfuzz report: medfuzz/medqa_clean on medfuzz-scripted/x: shards of 2 different "
                        "configurations (task args seed: 0 / 1); each configuration is merged apart and none is "
                        "pooled with another. Report each configuration's shard logs on their own.")
    # and each configuration on its own is an incomplete run: shard 2 and shard 1 missing
    assert sum("no shard log covers them" in line for line in lines) == 2 and len(lines) == 4
    page = _page(out)
    assert page.count("Run error: shards of this run, merged: 1 shard log(s) of 2") == 4  # 2 cards, 2 glance banners
    assert "status</th><td>success" not in page


def test_two_whole_shard_sets_of_different_settings_are_two_runs(tmp_path: Path,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    from medfuzz.tasks.inspect.baselines import medqa_clean

    paths = [*_shards(tmp_path / "seed0", [(k, medqa_clean(data="demo", limit=4)) for k in (1, 2)]),
             *_shards(tmp_path / "seed1", [(k, medqa_clean(data="demo", limit=4, seed=1)) for k in (1, 2)])]
    out = tmp_path / "report"
    assert _report(capsys, *map(str, paths), "--out", str(out)) == (0, [])
    assert "Clean baselines (2 runs)" in _page(out) and len(list((out / "merged-shards").glob("*.eval"))) == 2


def test_medguard_logs_of_different_settings_are_separate_runs(logs: dict[str, Path]) -> None:
    from medfuzz.report.medguard import compare, load_runs

    # 2 aspects x the first 4 items each: 8 items per run; pooled, the two seeds made 16 (the "19 not 14")
    runs = load_runs([logs["seed0"], logs["seed1"]])
    assert sorted((r.label, len(r.results)) for r in runs) == [
        ("medfuzz-scripted/always-a · basic · seed 0", 8), ("medfuzz-scripted/always-a · basic · seed 1", 8)]
    assert sorted(compare([logs["seed0"], logs["seed1"]]).models) == sorted(r.label for r in runs)
    # one log per aspect task with the same settings is still one run
    [joined] = load_runs([logs["defense"], logs["sycophancy"]])
    assert joined.label == "medfuzz-scripted/always-a · basic" and len(joined.results) == 8
    assert len(joined.sources) == 2


def test_the_first_screen_shows_each_medguard_setting_apart(logs: dict[str, Path], tmp_path: Path,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "report"
    code, lines = _report(capsys, str(logs["seed0"]), str(logs["seed1"]), "--out", str(out))
    assert code == 0 and lines == []
    page = _page(out)
    assert "MedGuard · basic prompts · seed 0" in page and "MedGuard · basic prompts · seed 1" in page
    summary = json.loads((out / "summary.json").read_text(encoding="utf-8"))
    titles = sorted(r["title"] for r in summary["models"]["medfuzz-scripted/always-a"]["results"])
    assert titles == ["MedGuard · basic prompts · seed 0", "MedGuard · basic prompts · seed 1"]


# ------------------------------------------------------------------------------------ no stale page, no paths


def test_a_new_render_removes_what_the_last_one_wrote_and_nothing_else(
        logs: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "report"
    assert _report(capsys, str(logs["seed0"]), str(logs["seed1"]), "--out", str(out))[0] == 0
    charts = sorted(p.name for p in out.glob("medguard_*.png"))
    assert len(charts) == 2 and all("seed" in name for name in charts)
    (out / "notes.txt").write_text("mine")  # a user's file in the report folder
    assert _report(capsys, str(logs["seed0"]), "--out", str(out))[0] == 0
    assert sorted(p.name for p in out.glob("medguard_*.png")) == ["medguard_medfuzz-scripted_always-a_basic.png"]
    assert (out / "notes.txt").read_text() == "mine"
    listed = [entry["path"] for entry in json.loads((out / ".medfuzz-report.json").read_text())["files"]]
    assert "notes.txt" not in listed and "index.html" in listed
    # a file medfuzz wrote and the user changed since (a review sheet filled in place) is the user's now
    (out / "medguard_comparison.md").write_text("my edits")
    # nothing to report: no page from the earlier render is left to be mistaken for this one
    empty = tmp_path / "empty"
    empty.mkdir()
    assert _report(capsys, str(empty), "--out", str(out))[0] == 1
    assert sorted(p.name for p in out.iterdir()) == [".medfuzz-report.json", "medguard_comparison.md", "notes.txt"]


def test_the_page_shows_no_absolute_path_and_no_python_repr(tmp_path: Path, logs: dict[str, Path],
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    from medfuzz.report.format import shown_path
    from medfuzz.report.index import model_args_text

    out = tmp_path / "deep" / "report"
    assert _report(capsys, str(logs["baseline"]), str(logs["seed0"]), "--out", str(out))[0] == 0
    page = _page(out)
    root = str(logs["baseline"].parents[2])
    assert root not in page and str(Path.home()) + "/" not in page
    assert "{&#x27;" not in page and "['" not in page
    assert f"<code>{logs['baseline'].name}</code>" in page  # too far from the report folder: the file name
    assert shown_path(out / "merged-shards" / "a.eval", out) == "merged-shards/a.eval"
    assert shown_path(out.parent / "inspect" / "a.eval", out) == "../inspect/a.eval"
    assert shown_path(Path("/somewhere/else/far/away/a.eval"), out) == "a.eval"
    assert model_args_text({"pretrained": "/home/me/models/tiny", "dtype": "float32"}) == \
        "pretrained=tiny, dtype=float32"
    assert model_args_text("base_url=http://127.0.0.1:8000/v1/completions,tokenizer_backend=remote") == \
        "base_url=http://127.0.0.1:8000/v1/completions, tokenizer_backend=remote"


def _lm_eval_medguard(folder: Path, stamp: str, metadata: dict) -> None:
    """An lm-eval MedGuard run in lm-eval's layout: results_<stamp>.json + samples_medguard_defense_<stamp>.jsonl,
    every answer "A" (two defense items)."""
    from medfuzz.solvers.medguard.builders import BuildConfig, build, limit_per_pool
    from medfuzz.tasks.lm_eval.medguard import item_to_doc

    folder.mkdir(parents=True, exist_ok=True)
    items = limit_per_pool(build(BuildConfig(n=2), "defense").items, 2)
    docs = [{**item_to_doc(i, "basic"), "aspect": "defense"} for i in items]
    lines = [json.dumps({"doc": d, "filtered_resps": [[str(-1.0 if letter == "A" else -2.0), "False"]
                                                      for letter in d["letters"]]}) for d in docs]
    (folder / f"samples_medguard_defense_{stamp}.jsonl").write_text("\n".join(lines) + "\n")
    (folder / f"results_{stamp}.json").write_text(json.dumps({
        "results": {}, "configs": {"medguard_defense": {"metadata": {"version": 1.0, **metadata}}},
        "config": {"model": "hf", "model_args": {"pretrained": "/models/tiny", "dtype": "float32"}}}))


def test_lm_eval_medguard_runs_of_different_metadata_are_separate_and_args_read_as_words(tmp_path: Path) -> None:
    from medfuzz.report.index import lm_eval_card
    from medfuzz.report.medguard import load_runs

    _lm_eval_medguard(tmp_path / "a", "2026-01-01T00-00-00", {"data": "demo"})
    _lm_eval_medguard(tmp_path / "b", "2026-01-02T00-00-00", {"data": "demo", "medguard_seed": 1})
    runs = load_runs([tmp_path])
    assert sorted((r.label, len(r.results)) for r in runs) == [
        ("/models/tiny · basic · lm-eval · medguard_seed 1", 2),  # the served model, as the user named it
        ("/models/tiny · basic · lm-eval · medguard_seed unset", 2)]
    _lm_eval_medguard(tmp_path / "c", "2026-01-03T00-00-00", {"data": "demo"})  # the same settings: one run
    assert sorted(len(r.sources) for r in load_runs([tmp_path])) == [1, 2]
    card = lm_eval_card(tmp_path / "a" / "results_2026-01-01T00-00-00.json")
    # a dict as words, a path as its name
    assert card.facts["model"] == "/models/tiny (lm-eval --model hf --model_args pretrained=tiny, dtype=float32)"


def test_a_log_with_an_oversized_member_is_left_out_named_without_reading_it(tmp_path: Path,
                                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """A runaway model output makes a tiny ``.eval`` hold a huge member, which Inspect would decompress whole:
    the zip directory's sizes are checked first, and the log is left out with the member named (the cap is an
    environment variable)."""
    import zipfile

    from medfuzz.report import usable_logs
    from medfuzz.report.log_reader import MEMBER_CAP_VARIABLE, OversizedLog, check_member_sizes, read_log
    from medfuzz.report.problems import Problems

    path = tmp_path / "huge.eval"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("header.json", "{}")
        archive.writestr("samples/q1_epoch_1.json", b'{"output": "' + b"x" * 3_000_000 + b'"}')
    assert path.stat().st_size < 50_000
    monkeypatch.setenv(MEMBER_CAP_VARIABLE, "2")
    with pytest.raises(OversizedLog, match=r"samples/q1_epoch_1.json is 3 MB decompressed, above the 2 MB"):
        check_member_sizes(path)
    with pytest.raises(OversizedLog):
        read_log(path)
    problems = Problems()
    assert usable_logs([path], tmp_path, problems) == []
    [problem] = problems
    assert "samples/q1_epoch_1.json is 3 MB decompressed" in problem.line() and MEMBER_CAP_VARIABLE in problem.line()
    monkeypatch.setenv(MEMBER_CAP_VARIABLE, "4")
    check_member_sizes(path)  # under a raised cap: read as usual (here: not a log, Inspect's own error)
