"""The planted models behave exactly as their spec says, on every face, and speak the MedFuzz protocol."""

from __future__ import annotations

import asyncio
import math

import numpy as np
import pytest
from scipy import stats

from medfuzz.benchmarks.items import MCQItem
from medfuzz.benchmarks.prompts import completion_prompt, letter_prompt
from medfuzz.models.protocol import ChatMessage
from medfuzz.options import ConfigError
from medfuzz.planted import PlantedAttacker, PlantedChatModel, PlantedSpec, PlantedTarget, planted_pair
from medfuzz.planted.attacker import classify_attacker_step
from medfuzz.planted.scoring import continuation_logprob
from medfuzz.planted.text import classify_target_step, find_question, messages_from_text, render_chat
from medfuzz.solvers.medfuzz import prompts
from medfuzz.solvers.medfuzz.parsing import added_word_count, parse_modified_item

ITEM = MCQItem(id="q1", question="A 30-year-old man has a cough. A chest film shows a cavity. Which drug is given?",
               options={"A": "Isoniazid", "B": "Aspirin", "C": "Insulin", "D": "Heparin"}, answer="A")


def ask(model: PlantedChatModel, text: str, seed: int = 0, temperature: float | None = 1.0):
    return asyncio.run(model.generate([ChatMessage("user", text)], seed=seed, temperature=temperature,
                                      letters=list("ABCD")))


def test_bad_spec_names_the_field(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("target:\n  delta: 2\n")
    with pytest.raises(ConfigError, match="delta"):
        PlantedSpec.load(bad)
    bad.write_text("target:\n  detla: 0.1\n")
    with pytest.raises(ConfigError, match="did you mean 'delta'"):
        PlantedSpec.load(bad)
    bad.write_text("attacker:\n  control_words: [bees]\n  trigger_sentences: [He keeps bees.]\n"
                   "target:\n  triggers: [keeps bees]\n")
    with pytest.raises(ConfigError, match="trigger-free"):
        PlantedSpec.load(bad)


def test_distribution_follows_the_planted_rule():
    spec = PlantedSpec().with_target(accuracy="constant", constant=0.8, noise=0.05, delta=0.3)
    target = PlantedTarget(spec, [ITEM])
    planted = target.planted_distractor[ITEM.id]
    plain = find_question([ChatMessage("user", letter_prompt(ITEM))])
    trig = find_question([ChatMessage("user", letter_prompt(ITEM.with_question(
        "A 30-year-old man has a cough. He keeps bees. A chest film shows a cavity. Which drug is given?")))])
    keys = [target.distribution(plain, seed)["A"] for seed in range(400)]
    assert min(keys) >= 0.75 and max(keys) <= 0.85
    assert abs(np.mean(keys) - 0.8) < 4 * (0.05 / math.sqrt(3)) / math.sqrt(400)  # uniform ±0.05
    exact = PlantedTarget(spec.with_target(noise=0.0), [ITEM])
    probs = exact.distribution(trig, 7)
    base = exact.distribution(plain, 7)
    assert probs["A"] == pytest.approx(base["A"] - 0.3)
    planted_letter = next(k for k, v in ITEM.options.items() if v == planted)
    assert probs[planted_letter] == pytest.approx(base[planted_letter] + 0.3)
    assert sum(probs.values()) == pytest.approx(1.0)
    unknown = find_question([ChatMessage("user", "Which?\n\nA. x\nB. y\nC. z")])
    assert target.distribution(unknown, 0) == {"A": 1 / 3, "B": 1 / 3, "C": 1 / 3}


def test_chat_face_logprobs_are_the_planted_probabilities_and_samples_follow_them():
    spec = PlantedSpec().with_target(accuracy="constant", constant=0.7, noise=0.0)
    model = PlantedChatModel(PlantedTarget(spec, [ITEM]))
    out = ask(model, letter_prompt(ITEM))
    assert math.exp(out.letter_logprobs["A"]) == pytest.approx(0.7)
    assert ask(model, letter_prompt(ITEM), temperature=0).text == "A"
    n = 600
    hits = sum(ask(model, letter_prompt(ITEM), seed=s).text == "A" for s in range(n))
    assert stats.binomtest(hits, n, 0.7).pvalue > 0.001
    shuffled = ITEM.shuffled(3)
    out = ask(model, letter_prompt(shuffled), temperature=0)
    assert out.text == shuffled.answer


def test_position_bias_one_is_a_constant_letter_model():
    spec = PlantedSpec().with_target(bias_rate=1.0, bias_letter="B")
    model = PlantedChatModel(PlantedTarget(spec, [ITEM]))
    assert {ask(model, letter_prompt(ITEM.shuffled(s)), seed=s).text for s in range(30)} == {"B"}


def test_step_classifiers_follow_the_real_prompts():
    exemplars = [ITEM.with_question("Another question?")]
    dialog = [*prompts.target_system(exemplars), ChatMessage("user", prompts.target_cot(ITEM))]
    assert classify_target_step(dialog) == "reasoning"
    assert find_question(dialog).options == ITEM.options
    dialog += [ChatMessage("assistant", "x"), ChatMessage("user", prompts.TARGET_CONFIDENCE)]
    assert classify_target_step(dialog) == "confidences"
    dialog += [ChatMessage("assistant", "A: 5"), ChatMessage("user", prompts.target_answer(ITEM))]
    assert classify_target_step(dialog) == "answer"
    assert classify_target_step([ChatMessage("user", prompts.target_direct(ITEM))]) == "answer"
    pack = prompts.load_pack()
    attacker = [ChatMessage("system", prompts.ATTACKER_SYSTEM),
                ChatMessage("user", prompts.attacker_cold_start(pack, ITEM, "cot", "A: 5"))]
    assert classify_attacker_step(attacker) == "plan"
    assert classify_attacker_step([*attacker, ChatMessage("user", prompts.attacker_item_request(ITEM))]) == "item"
    assert classify_attacker_step([*attacker, ChatMessage("user", prompts.attacker_fix("bad", ITEM))]) == "item"
    assert classify_attacker_step([*attacker, ChatMessage("user", prompts.attacker_postmortem("a", "b", "c"))]) \
        == "postmortem"
    assert classify_attacker_step([*attacker, ChatMessage("user", prompts.attacker_replan(pack, ITEM))]) == "plan"
    control = prompts.control_fuzz(pack, ITEM, ITEM.with_question(ITEM.question + " He reads."), 2)
    assert classify_attacker_step([ChatMessage("user", control)]) == "control"


def _attacker_dialog(turn_requests: int = 1) -> list[ChatMessage]:
    pack = prompts.load_pack()
    dialog = [ChatMessage("system", prompts.ATTACKER_SYSTEM),
              ChatMessage("user", prompts.attacker_cold_start(pack, ITEM, "cot", "A: 5"))]
    for _ in range(turn_requests):
        dialog += [ChatMessage("assistant", "plan"), ChatMessage("user", prompts.attacker_item_request(ITEM))]
    return dialog


def test_attacker_items_are_valid_and_malformed_ones_are_rejected():
    spec = PlantedSpec().attacker
    attacker = PlantedAttacker(spec, seed=0)
    triggers = PlantedSpec().target.triggers
    kinds, with_trigger = [], 0
    for seed in range(300):
        text = attacker.respond(_attacker_dialog(), seed=seed).text
        parsed = parse_modified_item(text, ITEM)
        kinds.append(parsed.kind)
        if parsed.ok:
            assert ITEM.question.split(". ")[0] in parsed.item.question
            with_trigger += any(t in parsed.item.question for t in triggers)
    malformed = sum(k is not None for k in kinds)
    assert {k for k in kinds if k} == {"tampered_options", "dropped_original", "unchanged"}
    assert stats.binomtest(malformed, 300, spec.malformed_rate).pvalue > 0.001
    valid = 300 - malformed
    assert stats.binomtest(with_trigger, valid, spec.trigger_probability(1)).pvalue > 0.001
    # the trigger probability grows with the turn (post-mortems)
    later = [attacker.respond(_attacker_dialog(4), seed=s).text for s in range(300)]
    assert sum(any(t in x for t in triggers) for x in later) > with_trigger + 30


def test_controls_keep_the_word_count_and_carry_no_trigger():
    spec = PlantedSpec().with_attacker(malformed_rate=0.0)
    attacker = PlantedAttacker(spec.attacker, seed=0)
    fuzzed_text = attacker.respond(_attacker_dialog(), seed=1).text
    fuzzed = parse_modified_item(fuzzed_text, ITEM).item
    control_prompt = prompts.control_fuzz(prompts.load_pack(), ITEM, fuzzed, 0)
    words = added_word_count(ITEM.question, fuzzed.question)
    for seed in range(50):
        text = attacker.respond([ChatMessage("user", control_prompt)], seed=seed).text
        parsed = parse_modified_item(text, ITEM)
        assert parsed.ok, parsed.problem
        assert added_word_count(ITEM.question, parsed.item.question) == words
        assert not any(t in parsed.item.question.lower() for t in spec.target.triggers)


def test_chat_rendering_round_trips_and_completion_loglikelihood_is_log_p():
    spec = PlantedSpec().with_target(accuracy="constant", constant=0.6, noise=0.0)
    target = PlantedTarget(spec, [ITEM])
    messages = [ChatMessage("system", "s"), ChatMessage("user", letter_prompt(ITEM))]
    assert messages_from_text(render_chat(messages)) == messages
    for letter, p in (("A", 0.6), ("B", 0.4 / 3)):
        ll, greedy = continuation_logprob(target, completion_prompt(ITEM), f" {letter}")
        assert ll == pytest.approx(math.log(p))
        assert greedy == (letter == "A")
        ll, _ = continuation_logprob(target, render_chat(messages), letter)
        assert ll == pytest.approx(math.log(p))


def test_server_faces_agree_with_the_chat_face(planted_server, demo_items):
    from openai import OpenAI

    client = OpenAI(base_url=planted_server.base_url, api_key="planted")
    assert [m.id for m in client.models.list().data] == ["planted", "planted-attacker"]
    target, _ = planted_pair(planted_server.app.spec, demo_items)
    item = demo_items[3]
    reply = client.chat.completions.create(model="planted", messages=[{"role": "user", "content": letter_prompt(item)}],
                                           logprobs=True, top_logprobs=20, seed=5, temperature=1.0)
    local = ask(target, letter_prompt(item), seed=5)
    served = {t.token: t.logprob for t in reply.choices[0].logprobs.content[0].top_logprobs}
    assert served == pytest.approx(local.letter_logprobs)
    assert reply.choices[0].message.content == local.text
    completion = client.completions.create(model="planted", prompt=completion_prompt(item) + " B", echo=True,
                                           logprobs=1, max_tokens=1, temperature=0, seed=9)
    token_logprobs = completion.choices[0].logprobs.token_logprobs
    context = len(completion_prompt(item))
    expected, _ = continuation_logprob(planted_server.app.target, completion_prompt(item), " B", seed=9)
    assert sum(token_logprobs[context:-1]) == pytest.approx(expected)
    assert expected < -0.01


def test_a_substitution_that_recreates_another_items_options_is_still_the_shown_item():
    """A TCES substitution can turn one item's options into another item's option set; the stem, which TCES
    keeps, must decide (found by the TCES validation: the target answered the other item's key)."""
    other = MCQItem(id="q2", question="A 60-year-old woman has atrial fibrillation. Which drug prevents stroke?",
                    options={"A": "Isoniazid", "B": "Aspirin", "C": "Warfarin", "D": "Heparin"}, answer="C")
    spec = PlantedSpec().with_target(accuracy="constant", constant=0.7, noise=0.0).with_tces(radius=None,
                                                                                            universal=[])
    target = PlantedTarget(spec, [ITEM, other])
    substituted = ITEM.with_options({**ITEM.options, "C": "Warfarin"})  # now the option set of ``other``
    shown = find_question([ChatMessage("user", letter_prompt(substituted))])
    assert target.identify(shown).id == ITEM.id
    assert max(target.distribution(shown, 0).items(), key=lambda kv: kv[1])[0] == "A"
    medfuzz_like = find_question([ChatMessage("user", letter_prompt(other.with_question(
        "A 60-year-old woman has atrial fibrillation. He keeps bees. Which drug prevents stroke?")))])
    assert target.identify(medfuzz_like).id == other.id  # a rewritten stem: the options decide


def test_a_spec_written_by_to_dict_loads_back_unchanged(tmp_path):
    import yaml

    spec = PlantedSpec.load().with_target(delta=0.25).with_tces(radius=0.4)
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(spec.to_dict()))
    assert PlantedSpec.load(path).to_dict() == spec.to_dict()


def test_planted_server_latency_delays_model_calls_and_overlaps_them():
    import json
    import time
    import urllib.request
    from concurrent.futures import ThreadPoolExecutor

    from medfuzz.planted.server import API_KEY, launch

    server = launch(PlantedSpec.load().with_target(data="demo"), latency_ms=300)
    try:
        body = json.dumps({"model": server.target_name, "messages": [{"role": "user", "content": "Hi"}],
                           "max_tokens": 4}).encode()

        def call() -> float:
            request = urllib.request.Request(f"{server.base_url}/chat/completions", data=body, method="POST",
                                             headers={"Content-Type": "application/json",
                                                      "Authorization": f"Bearer {API_KEY}"})
            start = time.perf_counter()
            with urllib.request.urlopen(request, timeout=10) as response:
                assert response.status == 200
            return time.perf_counter() - start

        assert call() >= 0.3
        start = time.perf_counter()
        with ThreadPoolExecutor(4) as pool:
            assert all(t >= 0.3 for t in pool.map(lambda _: call(), range(4)))
        assert time.perf_counter() - start < 1.0  # four calls in flight at once, not one after another (1.2 s)
        with urllib.request.urlopen(f"{server.base_url}/models", timeout=10) as response:  # not a model call
            assert response.status == 200
    finally:
        server.stop()
    with pytest.raises(ValueError, match="latency_ms"):
        launch(latency_ms=-1)


def test_planted_server_transient_faults_fail_the_first_attempt_only():
    """A seeded share of distinct calls fails once (500, 429 with Retry-After, or a hang that closes without a
    reply); the same request body then succeeds; GETs and the rest are untouched."""
    import json
    import urllib.error
    import urllib.request

    from medfuzz.planted.server import API_KEY, TransientFaults, launch

    faults = TransientFaults(rate=0.5, hang_seconds=0.2, seed=3)
    server = launch(PlantedSpec.load().with_target(data="demo"), faults=faults)

    def call(text: str) -> int:
        body = json.dumps({"model": server.target_name, "messages": [{"role": "user", "content": text}],
                           "max_tokens": 4}).encode()
        request = urllib.request.Request(f"{server.base_url}/chat/completions", data=body, method="POST",
                                         headers={"Content-Type": "application/json",
                                                  "Authorization": f"Bearer {API_KEY}"})
        try:
            with urllib.request.urlopen(request, timeout=10) as response:
                return response.status
        except urllib.error.HTTPError as err:
            assert err.code != 429 or err.headers["Retry-After"] == "1"
            return err.code
        except (urllib.error.URLError, ConnectionError, OSError):  # the hang: closed without a reply
            return 0

    try:
        first = {text: call(text) for text in (f"question {i}" for i in range(40))}
        again = {text: call(text) for text in first}
        failed = [t for t, status in first.items() if status != 200]
        assert 8 <= len(failed) <= 32  # about half of 40 distinct requests
        assert set(first.values()) <= {200, 500, 429, 0} and all(s == 200 for s in again.values())
        assert sum(faults.served.values()) == len(failed) and set(faults.served) <= {"500", "429", "hang"}
        with urllib.request.urlopen(f"{server.base_url}/models", timeout=10) as response:
            assert response.status == 200
    finally:
        server.stop()
    assert TransientFaults.parse("0.1:500+hang").kinds == ("500", "hang")
    for bad in ("x", "0.1:404", "2"):
        with pytest.raises(ValueError, match=r"--faults"):
            TransientFaults.parse(bad)
