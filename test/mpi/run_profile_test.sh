#!/usr/bin/env bash
# The accuracy loop end to end on 2 MPI ranks, small: run_profile_test.sh BIN_DIR SOURCE_DIR WORK_DIR
#   mpirun -np 2 octorun profile tiny-hybrid  → a measured costs file with the link, readable by octoplan
#   octoplan baseline --costs it, mpirun -np 2 octorun PLAN --report → octoplan accuracy PLAN REPORT
# and the errors: a report of another plan, --backend cuda without CUDA. The figures themselves
# depend on the machine's load and are not asserted (scripts/accuracy-loop measures them).
# Exit 0 pass, 1 fail.
set -u
bin=$1
src=$2
work=$3
mkdir -p "$work"
dir=$(mktemp -d "$work/profile.XXXXXX")
trap 'rm -rf "$dir"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_btl_base_warn_component_unused=0
export OPENBLAS_NUM_THREADS=1
model=$src/profiles/models/tiny-hybrid.yaml
cluster=$src/profiles/clusters/cpu-local.yaml
fail() {
  echo "FAIL (profile-accuracy): $*"
  exit 1
}
run() {  # run LOG COMMAND...: output to LOG, shown on failure
  local log=$1
  shift
  "$@" >"$log" 2>&1
  local rc=$?
  ((rc == 0)) || { cat "$log"; fail "exit code $rc: $*"; }
}

# 1. Profile on 2 ranks: measured costs with the link, one entry per layer, and a summary.
run "$dir/profile.log" mpirun --oversubscribe --bind-to none -np 2 "$bin/octorun" profile "$model" \
  --backend cpu --reps 3 --warmup 1 -o "$dir/costs.yaml"
cat "$dir/profile.log"
grep -q "^source: measured" "$dir/costs.yaml" || fail "costs file not marked measured"
grep -q "^backend: \"cpu\"" "$dir/costs.yaml" || fail "costs file names no backend"
grep -q "^p2p: {bandwidth_gbs: .*latency_us: " "$dir/costs.yaml" || fail "no measured link in the costs file"
grep -q "^layer .* F ms .* act KiB" "$dir/profile.log" || fail "no summary table"
grep -q "\[6/6\] 'lm_head'" "$dir/profile.log" || fail "no progress line for the last distinct layer"

# 2. octoplan reads it unchanged; the plan runs; the accuracy command compares both.
run "$dir/plan.log" "$bin/octoplan" baseline "$model" --cluster "$cluster" --costs "$dir/costs.yaml" --pp 2 \
  --schedule 1f1b -o "$dir/plan.json"
run "$dir/run.log" mpirun --oversubscribe --bind-to none -np 2 "$bin/octorun" "$dir/plan.json" --steps 3 \
  --warmup 1 --report "$dir/run.json"
run "$dir/accuracy.log" "$bin/octoplan" accuracy "$dir/plan.json" "$dir/run.json" --report "$dir/accuracy.json"
cat "$dir/accuracy.log"
grep -q "^iteration time .* ms .* ms .* %" "$dir/accuracy.log" || fail "no iteration-time row"
python3 - "$dir/accuracy.json" <<'PY' || fail "accuracy report is wrong"
import json, sys
a = json.load(open(sys.argv[1]))
assert a["command"] == "accuracy" and a["devices"] == 2
metrics = [r["metric"] for r in a["rows"]]
for m in ("iteration time", "bubble ratio", "busy time", "peak memory", "peak activations"):
    assert m in metrics, m
assert metrics.count("busy time") == 2 and metrics.count("peak memory") == 2
for key in ("iteration_time_error_pct", "max_busy_error_pct", "bubble_error_points", "max_peak_memory_error_pct"):
    v = a["summary"][key]
    assert isinstance(v, float) and abs(v) < 1000, (key, v)
assert len(a["stage_ops"]) >= 4  # F and BW (1F1B fuses B and W) of 2 stages
PY

# 3. A report of another plan (6 micro-batches instead of the model's 8) is refused.
run "$dir/plan6.log" "$bin/octoplan" baseline "$model" --cluster "$cluster" --costs "$dir/costs.yaml" --pp 2 \
  --schedule 1f1b --microbatches 6 -o "$dir/plan6.json"
"$bin/octoplan" accuracy "$dir/plan6.json" "$dir/run.json" >"$dir/mismatch.log" 2>&1 &&
  fail "accuracy accepted the report of another plan"
grep -q "does not belong to this plan" "$dir/mismatch.log" || { cat "$dir/mismatch.log"; fail "no clear mismatch error"; }

# 4. The cuda backend without a CUDA device: a clear error, no costs file.
if ! "$bin/octorun" profile "$model" --backend cuda -o "$dir/cuda.yaml" >"$dir/cuda.log" 2>&1; then
  grep -qi "cuda" "$dir/cuda.log" || { cat "$dir/cuda.log"; fail "the cuda error does not name CUDA"; }
  [[ ! -e "$dir/cuda.yaml" ]] || fail "a failed profile left a costs file"
else
  echo "note: this octorun has a working CUDA device; the cuda profile ran"
fi
# 5. A shape no rank here can hold is refused before any layer is built (exit 6), and bad data (a
#    token outside the vocabulary) before any measurement (exit 3), each naming what is wrong.
"$bin/octorun" profile "$model" --micro-batch 1000000 -o "$dir/huge.yaml" >"$dir/huge.log" 2>&1
rc=$?
[[ $rc -eq 6 ]] || { cat "$dir/huge.log"; fail "a profile beyond the machine's memory exited $rc (expected 6)"; }
grep -q "profiling it needs at least .* more than this machine's" "$dir/huge.log" || { cat "$dir/huge.log"; fail "no memory message"; }
sed 's/^vocab: 256$/vocab: 64/' "$model" >"$dir/v64.yaml"
"$bin/octorun" profile "$dir/v64.yaml" -o "$dir/v64-costs.yaml" >"$dir/v64.log" 2>&1
rc=$?
[[ $rc -eq 3 ]] || { cat "$dir/v64.log"; fail "out-of-vocabulary data exited $rc (expected 3)"; }
grep -q "outside the model's vocabulary of 64" "$dir/v64.log" || { cat "$dir/v64.log"; fail "no vocabulary message"; }
[[ ! -e "$dir/huge.yaml" && ! -e "$dir/v64-costs.yaml" ]] || fail "a refused profile left a costs file"
# 6. Shapes and counts the planner would refuse are usage errors (exit 2): a sequence longer than
#    the model's (it ran out of memory in the attention scores), 2e9 repetitions (an int overflow).
"$bin/octorun" profile "$model" --seq 100000 -o "$dir/long.yaml" >"$dir/long.log" 2>&1
rc=$?
[[ $rc -eq 2 ]] || { cat "$dir/long.log"; fail "--seq 100000 on a 64-token model exited $rc (expected 2)"; }
grep -q -- "--seq: 100000 is longer than the seq_len 64" "$dir/long.log" || { cat "$dir/long.log"; fail "no --seq message"; }
"$bin/octorun" profile "$model" --reps 2000000000 -o "$dir/reps.yaml" >"$dir/reps.log" 2>&1
rc=$?
[[ $rc -eq 2 ]] || { cat "$dir/reps.log"; fail "--reps 2e9 exited $rc (expected 2)"; }
# 7. A layer octorun cannot run (Mamba version 1) is refused at set-up (exit 3; its constructor
#    aborted the job in the measurement, exit 8), and an output that cannot take the costs
#    (/dev/full) is exit 4 naming -o on every rank, not an abort.
sed 's/^mamba: .*$/mamba: {version: 1, expand: 2, state: 4, conv: 2, dt_rank: 4}/' "$model" >"$dir/m1.yaml"
grep -q "version: 1" "$dir/m1.yaml" || fail "the Mamba-1 variant of the test model was not made"
"$bin/octorun" profile "$dir/m1.yaml" -o "$dir/m1-costs.yaml" >"$dir/m1.log" 2>&1
rc=$?
[[ $rc -eq 3 ]] || { cat "$dir/m1.log"; fail "a Mamba-1 model exited $rc (expected 3)"; }
grep -q "mamba.version is 1" "$dir/m1.log" || { cat "$dir/m1.log"; fail "no Mamba-1 message"; }
"$bin/octorun" profile "$model" --reps 1 -o /dev/full >"$dir/full.log" 2>&1
rc=$?
[[ $rc -eq 4 ]] || { cat "$dir/full.log"; fail "-o /dev/full exited $rc (expected 4)"; }
grep -q -- "-o /dev/full: write failed" "$dir/full.log" || { cat "$dir/full.log"; fail "no -o message"; }
echo "PASS (profile-accuracy)"
