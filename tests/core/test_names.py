"""No name of ours shadows one the harnesses ship, and every Inspect metric is registered once.

lm-eval silently lets a task in ``--include_path`` replace a built-in task of the same name, and Inspect's
registry silently keeps the last of two metrics registered under one name (DESIGN.md §4), so both are checked
here against the installed harnesses rather than by convention.
"""

from __future__ import annotations

from medfuzz.tasks import LM_EVAL_TASKS_PATH


def test_lm_eval_task_group_and_tag_names_are_disjoint_from_builtins() -> None:
    from lm_eval.tasks import TaskManager

    builtin = set(TaskManager(include_defaults=True).all_tasks)
    ours = set(TaskManager(include_path=str(LM_EVAL_TASKS_PATH), include_defaults=False).all_tasks)
    assert {"medqa_clean", "medfuzz_medqa", "tces_medqa_drugs", "medguard", "medguard_defense"} <= ours
    assert len(builtin) > 1000  # the real index, not an empty one
    assert ours.isdisjoint(builtin), sorted(ours & builtin)


def test_lm_eval_metric_names_are_not_lm_eval_s_own() -> None:
    """Our per-task metrics (process_results keys) never reuse a metric name lm-eval registers, whose aggregation
    and meaning a reader of the results would assume."""
    import lm_eval.api.metrics  # noqa: F401  (registers lm-eval's metrics)
    import yaml
    from lm_eval.api.registry import METRIC_REGISTRY

    class Loader(yaml.SafeLoader):
        pass

    Loader.add_constructor("!function", lambda loader, node: loader.construct_scalar(node))
    ours = set()
    for path in LM_EVAL_TASKS_PATH.rglob("_*template_yaml"):
        config = yaml.load(path.read_text(), Loader=Loader)
        if config.get("process_results"):
            ours |= {m["metric"] for m in config["metric_list"]}
    assert {"clean_acc", "flip_rate", "llm_errors", "llm_error_rate", "safety"} <= ours
    assert len(METRIC_REGISTRY) > 10 and ours.isdisjoint(METRIC_REGISTRY), sorted(ours & set(METRIC_REGISTRY))


def _registered_metrics() -> dict[str, list[object]]:
    import medfuzz._registry
    from medfuzz.tasks.inspect import baselines, medfuzz, medguard, tces

    found: dict[str, list[object]] = {}
    for module in (baselines, medfuzz, medguard, tces):
        for value in vars(module).values():
            info = getattr(value, "__registry_info__", None)
            if info is not None and info.type == "metric" and value not in found.get(info.name, []):
                found.setdefault(info.name, []).append(value)
    return found


def test_every_inspect_metric_name_is_registered_once() -> None:
    found = _registered_metrics()
    assert len(found) >= 15
    assert {name: len(fns) for name, fns in found.items() if len(fns) > 1} == {}
    # and none takes a name Inspect ships (accuracy, stderr, mean, ...)
    import inspect_ai.scorer as shipped

    assert {name.split("/")[-1] for name in found}.isdisjoint(
        {n for n in dir(shipped) if not n.startswith("_")})


def test_every_inspect_scorer_is_found_by_the_name_a_log_records() -> None:
    """``inspect score LOG`` looks each scorer up by the name Inspect records, without the package
    (``baseline_choice`` for ``medfuzz/baseline_choice``): every scorer of ours is found under it
    (``rescoring.rescorable``) and makes a scorer that records that name again; none of those names is one Inspect
    ships (a bare name is also looked up as ``inspect_ai/<name>``)."""
    from inspect_ai._util.registry import create_registry_object, registry_info, registry_lookup

    import medfuzz._registry  # every task module, so every scorer
    from medfuzz.tasks.inspect import baselines, failure_policy, medfuzz, medguard, tces

    ours = {}
    for module in (baselines, failure_policy, medfuzz, medguard, tces):
        for value in vars(module).values():
            info = getattr(value, "__registry_info__", None)
            if info is not None and info.type == "scorer" and not info.name.startswith("inspect_ai/"):
                ours[info.name.split("/")[-1]] = value
    assert {"baseline_choice", "lenient_choice", "medfuzz_scorer", "tces_scorer", "medguard"} <= set(ours)
    for name, factory in ours.items():
        found = registry_lookup("scorer", name)
        assert found is not None and getattr(found, "__wrapped__", found) is factory, name
        made = create_registry_object("scorer", name, {})  # what `inspect score` does with the recorded name
        assert registry_info(made).name == name and registry_info(made).metadata == registry_info(factory).metadata
    assert not [name for name in ours if registry_lookup("scorer", f"inspect_ai/{name}") is not None]
