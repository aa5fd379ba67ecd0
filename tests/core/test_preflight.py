"""The checks ``medfuzz run`` makes before its first paid call (``medfuzz.cli.suite.preflight``) and the helpers of
its stop logic (``medfuzz.cli.suite.stop``), in-process against the planted server and a closed port."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from medfuzz.cli.suite.preflight import (
    PreflightError,
    check_endpoint,
    check_inspect_models,
    check_lm_eval,
    endpoint_for,
)
from medfuzz.cli.suite.stop import FolderBusy, config_failure_of, error_text, folder_lock
from medfuzz.planted.server import PlantedServer


def closed_port() -> int:
    with socket.socket() as sock:  # bound, never listening: connections are refused
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_endpoint_for_reads_the_variables_inspect_reads() -> None:
    env = {"MY_SERVER_BASE_URL": "http://h:1/v1/", "MY_SERVER_API_KEY": "k"}
    endpoint = endpoint_for("openai-api/my-server/org/model-7b", env)
    assert (endpoint.name, endpoint.base_url, endpoint.api_key, endpoint.key_source) == (
        "org/model-7b", "http://h:1/v1", "k", "MY_SERVER_API_KEY")
    assert endpoint_for("openai/gpt-4o", {}).base_url == "https://api.openai.com/v1"
    assert endpoint_for("anthropic/claude-x", {}) is None  # no cheap check: the run says so
    with pytest.raises(PreflightError, match="set MY_SERVER_BASE_URL"):
        endpoint_for("openai-api/my-server/m", {})


def test_a_live_endpoint_with_the_model_passes(planted: PlantedServer) -> None:
    env = {"PLANTED_BASE_URL": planted.base_url, "PLANTED_API_KEY": "planted"}
    line = check_endpoint(endpoint_for("openai-api/planted/planted", env))
    assert line == (f"openai-api/planted/planted: {planted.base_url} answers and accepts the key in "
                    "PLANTED_API_KEY")
    assert planted.app.calls == {}  # the listing is no model call
    # the key variable unset: the planted server asks for none, and the line says so instead of "accepts the key"
    line = check_endpoint(endpoint_for("openai-api/planted/planted", {"PLANTED_BASE_URL": planted.base_url}))
    assert line == (f"openai-api/planted/planted: {planted.base_url} answers without a key (PLANTED_API_KEY is "
                    "unset; this endpoint asks for none)")


def test_a_model_the_endpoint_does_not_serve_is_one_line(planted: PlantedServer) -> None:
    env = {"PLANTED_BASE_URL": planted.base_url, "PLANTED_API_KEY": "planted"}
    with pytest.raises(PreflightError, match=r"does not serve 'plantd' \(it lists planted, planted-attacker\)"):
        check_endpoint(endpoint_for("openai-api/planted/plantd", env))


def test_a_refused_connection_is_one_line_within_the_timeout() -> None:
    port = closed_port()
    env = {"X_BASE_URL": f"http://127.0.0.1:{port}/v1", "X_API_KEY": "k"}
    with pytest.raises(PreflightError, match=r"cannot reach http://127.0.0.1:\d+/v1 \(.*Connection refused\)"):
        check_endpoint(endpoint_for("openai-api/x/m", env), timeout=2)


def test_a_hosted_providers_client_is_built_with_no_request(monkeypatch: pytest.MonkeyPatch) -> None:
    """A missing key or package, or a provider Inspect does not know: one line before the tasks are built (it was a
    traceback from the eval set, or the run's first call); a self-hosted provider other than an OpenAI-compatible
    endpoint is said to be unchecked (its client would load the model)."""
    monkeypatch.delenv("TOGETHER_API_KEY", raising=False)
    with pytest.raises(PreflightError, match=r"^together/org/m: ERROR: Unable to initialise Together client No "
                                             r"TOGETHER_API_KEY defined"):
        check_inspect_models(["together/org/m"])
    with pytest.raises(PreflightError, match=r"^nosuchprovider/x: Model API nosuchprovider of model "
                                             r"'nosuchprovider/x' not recognized\. \(provider names: "):
        check_inspect_models(["nosuchprovider/x"])
    monkeypatch.setenv("TOGETHER_API_KEY", "not-a-real-key")
    assert check_inspect_models(["together/org/m", "vllm/org/m", "medfuzz-template/attacker"]) == [
        "together/org/m: the provider's client builds (package installed, key set); the key is tried by the first "
        "call",
        "vllm/org/m: not checked before the run (no cheap check for provider 'vllm'; a wrong name stops the run at "
        "its first call)"]


def test_lm_eval_model_names_and_remote_tokenizer_are_checked(planted: PlantedServer) -> None:
    with pytest.raises(PreflightError, match=r"lm-eval has no model of this name \(did you mean 'local-completions'"):
        check_lm_eval("local-completion", "")
    args = f"model=planted,base_url={planted.base_url}/completions,tokenizer_backend=remote"
    assert check_lm_eval("local-completions", args)[1:] == ["lm-eval local-completions: the server serves planted",
                                                           "lm-eval local-completions: the server's tokenizer answers"]
    with pytest.raises(PreflightError, match=r"does not serve model='plantd' \(it lists planted, planted-attacker\)"):
        check_lm_eval("local-completions", args.replace("model=planted", "model=plantd"))
    port = closed_port()
    with pytest.raises(PreflightError, match="cannot reach"):
        check_lm_eval("local-completions", f"model=m,base_url=http://127.0.0.1:{port}/v1/completions,"
                                           "tokenizer_backend=remote", timeout=2)


def test_an_error_recorded_as_a_repr_is_shown_as_text() -> None:
    assert error_text('ModelConfigError("model call failed: HTTP 401")') == "model call failed: HTTP 401"
    assert error_text("ValueError('x y')") == "x y"
    assert error_text("plain text") == "plain text"

    class Error:
        message = 'ModelConfigError("short")'
        traceback = "Traceback ...\nmedfuzz.models.failures.ModelConfigError: the whole reason (HTTP 404)\n"

    class Record:
        error = Error()

    assert config_failure_of(Record()) == "the whole reason (HTTP 404)"
    Record.error = None
    assert config_failure_of(Record()) is None


def test_the_folder_lock_refuses_a_second_holder_and_is_released(tmp_path: Path) -> None:
    out = tmp_path / "out"
    code = ("import sys; from pathlib import Path; from medfuzz.cli.suite.stop import folder_lock\n"
            "try:\n    folder_lock(Path(sys.argv[1])).__enter__()\nexcept Exception as e:\n    print(e); sys.exit(3)")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(Path(__file__).parents[2] / "src"),
                                                        os.environ.get("PYTHONPATH", "")])}
    with folder_lock(out):
        other = subprocess.run([sys.executable, "-c", code, str(out)], capture_output=True, text=True, env=env,
                               check=False)
        assert other.returncode == 3 and f"another medfuzz run (pid {os.getpid()})" in other.stdout
        with pytest.raises(FolderBusy):  # a second lock in this process too (flock is per open file)
            folder_lock(out).__enter__()
    again = subprocess.run([sys.executable, "-c", code, str(out)], capture_output=True, text=True, env=env,
                           check=False)
    assert again.returncode == 0, again.stdout  # released when the holder left (here: the block; a killed
    # process: the kernel)
