#!/usr/bin/env bash
# Idempotent set-up on a machine with only Python 3.11 and pip: a .venv in the repository with medfuzz
# and every extra (the embedded model server, embeddings, plots, test tools).
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
[ -x .venv/bin/python ] || "$PYTHON" -m venv .venv
# torch first, pinned: this exact CPU wheel is on disk here; any other spec pulls GBs of CUDA packages.
.venv/bin/pip install --quiet --disable-pip-version-check torch==2.13.0
# llama-cpp-python has no wheel on PyPI and compiles (minutes on 2 cores; pip caches the wheel afterwards).
# Portable x86-64 flags: llama.cpp's default -march=native build also uses AMX on CPUs that advertise it,
# and sandboxes that do not grant AMX state kill the server with SIGILL on its first request.
CMAKE_ARGS="${CMAKE_ARGS:--DLLAVA_BUILD=OFF -DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_BMI2=ON}" \
  .venv/bin/pip install --quiet --disable-pip-version-check \
  -e ".[hf,local,embed,vocab,plots,explain,dev]"
