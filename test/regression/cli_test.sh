#!/usr/bin/env bash
# octoplan command-line checks. Usage: cli_test.sh CASE BIN_DIR SOURCE_DIR
set -uo pipefail
case_name=$1 bin=$2 src=$3
octoplan=$bin/octoplan
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$src" || exit 1

fail() { echo "FAIL: $*" >&2; exit 1; }
# expect_fail DESC PATTERN CMD...: CMD must exit non-zero and print PATTERN (regex) on stderr.
expect_fail() {
  local desc=$1 pattern=$2; shift 2
  local out rc
  out=$("$@" 2>&1 >/dev/null); rc=$?
  [[ $rc -ne 0 ]] || fail "$desc: exit code 0"
  [[ $rc -lt 128 ]] || fail "$desc: crashed with $rc: $out"
  grep -Eq -- "$pattern" <<<"$out" || fail "$desc: message '$out' does not match '$pattern'"
  echo "ok: $desc -> $out"
}

case $case_name in
help)
  "$octoplan" --help | grep -q "Subcommands" || fail "octoplan --help lists no subcommands"
  "$octoplan" --version | grep -Eq "^octoplan [0-9]+\.[0-9]+\.[0-9]+" || fail "octoplan --version"
  for sub in estimate baseline check simulate plan compare; do
    "$octoplan" "$sub" --help >/dev/null || fail "octoplan $sub --help"
  done
  "$bin/octorun" --help >/dev/null || fail "octorun --help"
  # import-hf's line lists the architectures of its registry, each of the shipped configs' included
  # (written by hand, it missed Bamba and the three Mamba classes).
  "$octoplan" --help >"$work/help.txt"
  for hf in profiles/hf/*.config.json; do
    arch=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["architectures"][0])' "$hf")
    grep "import-hf" "$work/help.txt" | grep -qF "$arch" || fail "octoplan --help: import-hf does not name $arch"
  done
  "$bin/octorun" --help >"$work/help.txt"
  grep -qF "mpirun -np DEVICES*DP*TP" "$work/help.txt" || fail "octorun --help: the rank count misses TP"
  expect_fail "no subcommand" "subcommand" "$octoplan"
  expect_fail "unknown option" "--frobnicate" "$octoplan" estimate profiles/models/tiny-hybrid.yaml --frobnicate
  ;;
estimate-errors)
  echo "keep me" >"$work/out.yaml"
  printf 'name: bad\nvocab: 256\nhidden: 64\nseq_len: 32\npattern: "M-X"\nmamba: {heads: 2, head_dim: 32, state: 8}\nmlp: {ffn: 128}\n' >"$work/bad-symbol.yaml"
  expect_fail "unknown pattern symbol" "bad-symbol.yaml:5:[0-9]+: pattern" \
    "$octoplan" estimate "$work/bad-symbol.yaml" -o "$work/out.yaml"
  printf 'name: bad\nvocab: 256\nhiden: 64\n' >"$work/typo.yaml"
  expect_fail "unknown key" "typo.yaml:3:1: .*hiden" "$octoplan" estimate "$work/typo.yaml" -o "$work/out.yaml"
  expect_fail "missing file" "nowhere.yaml" "$octoplan" estimate "$work/nowhere.yaml" -o "$work/out.yaml"
  # A shipped cluster by name; an unknown name lists them.
  "$octoplan" estimate profiles/models/tiny-hybrid.yaml --cluster a100x8 >"$work/a100.txt" || fail "--cluster a100x8 by name"
  grep -q "on A100-SXM-80GB (a100x8)" "$work/a100.txt" || fail "--cluster a100x8 did not load the shipped a100x8"
  expect_fail "an unknown cluster name" "h100-16x9: file not found .*shipped cluster by name: a100x8, cpu-local, h100-16x8, h100x8" \
    "$octoplan" estimate profiles/models/tiny-hybrid.yaml --cluster h100-16x9
  printf 'name: [unclosed\n' >"$work/syntax.yaml"
  expect_fail "YAML syntax" "syntax.yaml:[0-9]+:[0-9]+" "$octoplan" estimate "$work/syntax.yaml" -o "$work/out.yaml"
  [[ $(cat "$work/out.yaml") == "keep me" ]] || fail "existing output was modified on error"
  [[ $(ls -A "$work" | grep -c tmp) -eq 0 ]] || fail "temporary files left behind"
  "$octoplan" estimate profiles/models/tiny-hybrid.yaml --cluster profiles/clusters/cpu-local.yaml \
    -o "$work/out.yaml" >/dev/null || fail "estimate on tiny-hybrid"
  grep -q "source: estimated" "$work/out.yaml" || fail "estimate output not marked estimated"
  ;;
baseline-check)
  for s in gpipe 1f1b interleaved zb-h1 zb-v; do
    "$octoplan" baseline profiles/models/tiny-hybrid.yaml --cluster profiles/clusters/cpu-local.yaml \
      --schedule "$s" --pp 2 --microbatches 4 -o "$work/$s.json" --report "$work/$s.report.json" \
      >"$work/$s.out" || fail "baseline $s"
    # The printed report names the lower bounds and the gaps the JSON report carries.
    grep -Eq "^lower bound [0-9.]+ ms \([a-z_]+.*\), gap [0-9.]+ %; for this partition and placement [0-9.]+ ms" \
      "$work/$s.out" || fail "baseline $s prints no lower bound: $(cat "$work/$s.out")"
    "$octoplan" check "$work/$s.json" >/dev/null || fail "check of baseline $s"
    python3 - "$work/$s.report.json" <<'PY' || fail "report of $s lacks fields"
import json, sys
r = json.load(open(sys.argv[1]))
for k in ("iteration_time_ms", "bubble_ratio", "tokens_per_s", "fits_memory", "devices", "lower_bound_ms", "gap",
          "structure_lower_bound_ms"):
    assert k in r, k
assert 0 < r["lower_bound_ms"] <= r["structure_lower_bound_ms"] <= r["iteration_time_ms"] * (1 + 1e-9), r
assert abs(r["gap"] - (r["iteration_time_ms"] / r["lower_bound_ms"] - 1)) < 1e-9, r
for d in r["devices"]:
    for k in ("busy_ms", "idle_ms", "peak_memory_bytes"):
        assert k in d, k
PY
  done
  echo "keep me" >"$work/keep.json"
  expect_fail "zb-v needs two stages per device" "zb-v" "$octoplan" baseline profiles/models/tiny-hybrid.yaml \
    --cluster profiles/clusters/cpu-local.yaml --schedule zb-v --pp 4 --microbatches 1 -o "$work/keep.json"
  expect_fail "interleaved needs m multiple of p" "interleaved" "$octoplan" baseline profiles/models/tiny-hybrid.yaml \
    --cluster profiles/clusters/cpu-local.yaml --schedule interleaved --pp 2 --microbatches 3 -o "$work/keep.json"
  expect_fail "unknown schedule" "gpipe" "$octoplan" baseline profiles/models/tiny-hybrid.yaml --schedule nope -o "$work/keep.json"
  # --chunks that the chosen schedule cannot run is a usage error (exit 2), the user chose both.
  for sc in "1f1b 3" "zb-v 3" "gpipe 2"; do
    set -- $sc
    expect_fail "--chunks $2 with $1" "command line: --chunks: $1 runs" "$octoplan" baseline \
      profiles/models/tiny-hybrid.yaml --cluster profiles/clusters/cpu-local.yaml --schedule "$1" --chunks "$2" \
      --pp 2 --microbatches 4 -o "$work/keep.json"
    "$octoplan" baseline profiles/models/tiny-hybrid.yaml --cluster profiles/clusters/cpu-local.yaml \
      --schedule "$1" --chunks "$2" --pp 2 --microbatches 4 -o "$work/keep.json" >/dev/null 2>&1
    rc=$?
    [[ $rc -eq 2 ]] || fail "--chunks $2 with $1: exit $rc (expected 2, usage)"
  done
  [[ $(cat "$work/keep.json") == "keep me" ]] || fail "existing plan was modified on error"
  ;;
deadlock-check)
  "$octoplan" baseline profiles/models/tiny-hybrid.yaml --cluster profiles/clusters/cpu-local.yaml \
    --schedule 1f1b --pp 2 --microbatches 2 -o "$work/ok.json" >/dev/null || fail "baseline"
  # Swap device 1's first RECV (activation mb0) with its first SEND (gradient mb0): device 1 now
  # wants to send a gradient before it has received the activation it is computed from.
  python3 - "$work/ok.json" "$work/dead.json" <<'PY'
import json, sys
plan = json.load(open(sys.argv[1]))
ops = plan["devices"][1]["ops"]
recv = next(i for i, o in enumerate(ops) if o["op"] == "RECV")
send = next(i for i, o in enumerate(ops) if o["op"] == "SEND")
ops[recv], ops[send] = ops[send], ops[recv]
json.dump(plan, open(sys.argv[2], "w"))
PY
  expect_fail "crafted deadlock or misordered comm rejected" "dev|device" "$octoplan" check "$work/dead.json"
  # A rendezvous deadlock with valid structure: device 0 sends mb1's activation before it receives
  # mb0's gradient (as lowered), and we make device 1 send mb0's gradient before it receives mb1's
  # activation. Both wait at a SEND whose RECV sits behind it on the peer (rendezvous in order).
  python3 - "$work/ok.json" "$work/cross.json" <<'PY'
import json, sys
plan = json.load(open(sys.argv[1]))
d1 = plan["devices"][1]["ops"]
recv1 = next(i for i, o in enumerate(d1) if o["op"] == "RECV" and o["mb"] == 1)
op = d1.pop(recv1)
f1 = next(i for i, o in enumerate(d1) if o["op"] == "F" and o["mb"] == 1)
d1.insert(f1, op)
json.dump(plan, open(sys.argv[2], "w"))
PY
  out=$("$octoplan" check "$work/cross.json" 2>&1); rc=$?
  echo "$out"
  [[ $rc -ne 0 ]] || fail "crossed send/recv order accepted"
  grep -q "cycle 0 -> 1 -> 0" <<<"$out" || fail "deadlock message does not name the cycle"
  ;;
simulate)
  "$octoplan" baseline profiles/models/synthetic-uniform.yaml --costs profiles/costs/synthetic-uniform.yaml \
    --schedule 1f1b --pp 4 --microbatches 8 -o "$work/p.json" >/dev/null || fail "baseline"
  "$octoplan" simulate "$work/p.json" --report "$work/r.json" --trace "$work/t.json" >/dev/null || fail "simulate"
  python3 - "$work/r.json" "$work/t.json" <<'PY' || fail "simulate report/trace"
import json, sys
r = json.load(open(sys.argv[1]))
p, m = 4, 8
expected = (p - 1) / (m + p - 1)          # 1F1B closed form
assert abs(r["bubble_ratio"] - expected) < 1e-9, (r["bubble_ratio"], expected)
t = json.load(open(sys.argv[2]))
names = {e.get("name") for e in t["traceEvents"]}
assert any(n and n.startswith("F mb") for n in names)
assert any(e.get("ph") == "s" for e in t["traceEvents"])  # flow arrows send -> recv
PY
  ;;
plans-in-sync)
  # Every plans/*.json is reproduced exactly by the command recorded in plans/README.md.
  [[ -f plans/regenerate.sh ]] || fail "plans/regenerate.sh missing"
  OCTOPLAN=$octoplan bash plans/regenerate.sh "$work" >/dev/null || fail "regenerate failed"
  n=0
  for f in plans/*.json; do
    n=$((n + 1))
    cmp -s "$f" "$work/$(basename "$f")" || fail "$f differs from what octoplan writes now (run plans/regenerate.sh)"
  done
  [[ $n -gt 0 ]] || fail "no example plans"
  echo "ok: $n plans in sync"
  ;;
exit-codes)
  # expect_code CODE PATTERN CMD...: CMD exits with CODE and prints PATTERN on stderr (README "Errors").
  expect_code() {
    local want=$1 pattern=$2; shift 2
    local out rc
    out=$("$@" 2>&1 >/dev/null); rc=$?
    [[ $rc -eq $want ]] || fail "exit $rc instead of $want: $* ($out)"
    grep -Eq -- "$pattern" <<<"$out" || fail "message '$out' does not match '$pattern'"
    echo "ok: exit $rc: $out"
  }
  tiny=(profiles/models/tiny-hybrid.yaml --cluster profiles/clusters/cpu-local.yaml)
  expect_code 2 "--pp: must be at least 1 \(got 0\)" "$octoplan" baseline "${tiny[@]}" --schedule 1f1b --pp 0 -o "$work/p.json"
  expect_code 2 "--frobnicate" "$octoplan" estimate "${tiny[@]}" --frobnicate
  expect_code 2 "--output: must name a file" "$octoplan" baseline "${tiny[@]}" --schedule 1f1b --pp 2 -o ""
  expect_code 2 "--steps: must be at least 1" "$bin/octorun" plans/tiny-hybrid.1f1b.cpu2.json --steps 0
  expect_code 3 "nowhere.yaml" "$octoplan" estimate "$work/nowhere.yaml"
  # A limit that would round to 0 bytes ("no limit": everything fits) is refused.
  expect_code 2 "--memory-limit-gib: must be at least 1 MiB" "$octoplan" baseline "${tiny[@]}" --schedule 1f1b \
    --pp 2 --memory-limit-gib 1e-10 -o "$work/p.json"
  expect_code 2 "--memory-limit-gib: must be at least 1 MiB" "$octoplan" check plans/tiny-hybrid.1f1b.cpu2.json \
    --memory-limit-gib 1e-10
  # A limit past 2^30 GiB wrapped to a negative byte count (1e10 GiB: "fits" under -8589934592 GiB).
  expect_code 2 "--memory-limit-gib: must be at most 2\^30 GiB" "$octoplan" baseline "${tiny[@]}" --schedule 1f1b \
    --pp 2 --memory-limit-gib 1e10 -o "$work/p.json"
  sed 's/memory_gib: [0-9.]*/memory_gib: 1e10/' profiles/clusters/cpu-local.yaml >"$work/huge-memory.yaml"
  expect_code 3 "huge-memory.yaml:[0-9]+:[0-9]+: device.memory_gib: 1e10 is out of range" "$octoplan" baseline \
    profiles/models/tiny-hybrid.yaml --cluster "$work/huge-memory.yaml" --schedule 1f1b --pp 2 -o "$work/p.json"
  # Rates below 1e-6 (a denormal bandwidth made every figure inf, and the plan written failed check).
  sed 's/bandwidth_gbs: [0-9.e+]*/bandwidth_gbs: 4.9e-324/' profiles/costs/synthetic-uniform.yaml >"$work/slow-link.yaml"
  expect_code 3 "slow-link.yaml:[0-9]+:[0-9]+: p2p.bandwidth_gbs: 4.9e-324 is out of range \(expected a number >= 1e-06" \
    "$octoplan" baseline profiles/models/synthetic-uniform.yaml --costs "$work/slow-link.yaml" --schedule 1f1b \
    -o "$work/p.json"
  sed 's/bf16: [0-9.]*/bf16: 1e-300/' profiles/clusters/cpu-local.yaml >"$work/slow-device.yaml"
  expect_code 3 "slow-device.yaml:[0-9]+:[0-9]+: device.peak_tflops.bf16: 1e-300 is out of range" "$octoplan" \
    estimate profiles/models/tiny-hybrid.yaml --cluster "$work/slow-device.yaml"
  # The advice for a plan that does not fit skips a TP the model cannot take (tiny-hybrid has 4
  # heads; the default cluster's 8 devices offered --tp 8, and its estimate ended the command).
  expect_code 5 "does not fit" "$octoplan" baseline profiles/models/tiny-hybrid.yaml --schedule 1f1b \
    --memory-limit-gib 0.001 -o "$work/p.json"
  # An output that fails on write (/dev/full) leaves the others as they were.
  echo keep >"$work/kept.json"
  expect_code 4 "/dev/full: write failed" "$octoplan" baseline "${tiny[@]}" --schedule 1f1b --pp 2 \
    -o "$work/kept.json" --trace /dev/full
  [[ $(cat "$work/kept.json") == keep ]] || fail "the plan was replaced although its --trace failed"
  mkdir "$work/dir"
  expect_code 4 "is a directory" "$octoplan" estimate "${tiny[@]}" -o "$work/dir"
  # One file for two outputs, or an output over an input: refused before any work, nothing changed.
  echo keep > "$work/same.json"
  expect_code 4 "--trace .*same.json: is also the -o output" "$octoplan" baseline "${tiny[@]}" --schedule 1f1b \
    --pp 2 -o "$work/same.json" --trace "$work/same.json"
  [[ $(cat "$work/same.json") == keep ]] || fail "a refused output pair changed the file"
  cp plans/tiny-hybrid.1f1b.cpu2.json "$work/in.json"
  expect_code 4 "--report .*in.json: is an input of this command" "$octoplan" simulate "$work/in.json" \
    --report "$work/in.json"
  cmp -s plans/tiny-hybrid.1f1b.cpu2.json "$work/in.json" || fail "the report replaced the plan it read"
  expect_code 5 "does not fit.*--pp|does not fit.*recompute" "$octoplan" baseline "${tiny[@]}" --schedule 1f1b --pp 2 \
    --memory-limit-gib 0.001 -o "$work/p.json"
  [[ ! -e "$work/p.json" ]] || fail "a plan that does not fit was written"
  python3 - plans/tiny-hybrid.1f1b.cpu2.json "$work/bad.json" <<'PY'
import json, sys
plan = json.load(open(sys.argv[1]))
plan["predicted"]["iteration_time_ms"] *= 2
json.dump(plan, open(sys.argv[2], "w"))
PY
  expect_code 1 "predicted.iteration_time_ms" "$octoplan" check "$work/bad.json"
  # A plan with hundreds of problems: the first 20, the count of the rest, and no "can run it: yes".
  python3 - plans/tiny-hybrid.1f1b.cpu2.json "$work/few-mb.json" <<'PY'
import json, sys
plan = json.load(open(sys.argv[1]))
plan["microbatches"] = 1
json.dump(plan, open(sys.argv[2], "w"))
PY
  out=$("$octoplan" check "$work/few-mb.json" 2>&1); rc=$?
  [[ $rc -eq 1 ]] || fail "check of a plan with too few micro-batches: exit $rc"
  grep -q "octorun can run it: *NO" <<<"$out" || fail "check says octorun can run an invalid plan: $out"
  [[ $(grep -c "^  - " <<<"$out") -eq 20 ]] || fail "check lists more or fewer than the first 20 problems"
  grep -Eq "^  \.\.\. and [0-9]+ more \(--report FILE lists them all\)" <<<"$out" || fail "no count of the rest"
  # A plan check rejects is not exported or drawn either (the same check, memory aside).
  expect_code 3 "bad.json: predicted.iteration_time_ms" "$octoplan" export "$work/bad.json" --format megatron-layout
  expect_code 3 "bad.json: predicted.iteration_time_ms" "$octoplan" plot "$work/bad.json" -o "$work/bad.svg"
  [[ ! -e "$work/bad.svg" ]] || fail "plot drew a plan that check rejects"
  expect_code 3 "predicted.iteration_time_ms" "$octoplan" simulate "$work/bad.json"
  # The parallel options (README "Parallelism around the pipeline").
  expect_code 2 "--ep: 3 does not divide dp 4" "$octoplan" baseline "${tiny[@]}" --schedule 1f1b --pp 1 --dp 4 --ep 3 \
    -o "$work/p.json"
  expect_code 2 "--ep: 2, but model synthetic-uniform .* has no routed experts" "$octoplan" baseline \
    profiles/models/synthetic-uniform.yaml --cluster profiles/clusters/cpu-local.yaml --schedule 1f1b --pp 1 --dp 2 \
    --ep 2 -o "$work/p.json"
  expect_code 2 "--zero: 2 is too large" "$octoplan" baseline "${tiny[@]}" --schedule 1f1b --pp 1 --dp 2 --zero 2 \
    -o "$work/p.json"
  expect_code 2 "--search-parallel: it chooses tp, dp and pp itself" "$octoplan" plan "${tiny[@]}" --search-parallel \
    --tp 2 -o "$work/p.json"
  # Jamba-v0.1 cannot fit one 8-GPU node: the arithmetic and the smallest cluster that would.
  expect_code 5 "51.6 B parameters x 18 B .* = 865 GiB .* > 8 x 80 GiB = 640 GiB.* 2 nodes x 8 = 16 devices" \
    "$octoplan" plan profiles/models/jamba-v0.1.yaml --search-parallel -o "$work/p.json"
  [[ ! -e "$work/p.json" ]] || fail "a plan was written for a refused command"
  ;;
parameters)
  # Total and active parameters of a MoE model in estimate and in compare's header, against the
  # published figures of Jamba-v0.1 (52 B total, 12 B active per token) within 3 %.
  out=$("$octoplan" estimate profiles/models/jamba-v0.1.yaml --report "$work/e.json") || fail "estimate"
  grep -E "^Parameters: [0-9.]+B total, [0-9.]+B active per token" <<<"$out" || fail "estimate prints no parameters"
  python3 - "$work/e.json" <<'PY' || fail "estimate's parameter counts"
import json, sys
r = json.load(open(sys.argv[1]))
assert abs(r["total_params"] / 52e9 - 1) < 0.03, r["total_params"]
assert abs(r["active_params"] / 12e9 - 1) < 0.03, r["active_params"]
# The table's per-kind parameters (per TP rank, tp 1 here) add up to the same total.
assert abs(sum(k["params_per_layer"] * k["count"] for k in r["kinds"]) - r["total_params"]) < 1, r
PY
  total=$(grep -oE "^Parameters: [0-9.]+B total, [0-9.]+B active" <<<"$out" | sed 's/Parameters: //')
  out=$("$octoplan" compare profiles/models/jamba-v0.1.yaml --pp 4 --microbatches 8 --time-budget 0.5 --threads 1 \
    --quiet --report "$work/c.json") || fail "compare"
  head -1 <<<"$out"
  grep -q "^jamba-v0.1 (${total/ total, / parameters, } per token)" <<<"$out" || fail "compare's header lacks '$total'"
  ;;
bench-bound-case)
  # scripts/bench-bound --case runs a user's profile (a model and a cost file at a TP) in place of
  # the shipped classes: its bound is the one octoplan reports for those inputs, and the tuned plan
  # is not below it. Unknown files and a bad TP are refused.
  "$octoplan" estimate profiles/models/tiny-hybrid.yaml --cluster profiles/clusters/h100-16x8.yaml --tp 1 \
    -o "$work/tiny-costs.yaml" >/dev/null || fail "estimate"
  scripts/bench-bound --octoplan "$octoplan" --budgets 0.2 --threads 1 --pp 2 --m-per-pp 2 --seed 3 \
    --case tiny-hybrid "$work/tiny-costs.yaml" 1 --json "$work/bench.json" >"$work/bench.out" 2>&1 ||
    fail "bench-bound --case: $(cat "$work/bench.out")"
  "$octoplan" baseline profiles/models/tiny-hybrid.yaml --costs "$work/tiny-costs.yaml" --tp 1 --pp 2 \
    --microbatches 4 --cluster profiles/clusters/h100-16x8.yaml --schedule 1f1b --partition balanced \
    -o "$work/b.json" --report "$work/b.report.json" >/dev/null || fail "baseline"
  python3 - "$work/bench.json" "$work/b.report.json" <<'PY' || fail "bench-bound --case results"
import json, sys
bench, report = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
cases = bench["cases"]
assert bench["seed"] == 3, bench["seed"]
assert [(c["class"], c["model"], c["pp"], c["m"]) for c in cases] == [("tiny-costs", "tiny-hybrid", 2, 4)], cases
run = cases[0]["runs"]["0.2"]
assert abs(run["bound_ms"] - report["lower_bound_ms"]) <= 1e-9 * report["lower_bound_ms"], (run, report["lower_bound_ms"])
assert run["tuned_ms"] >= run["bound_ms"] * (1 - 1e-12), run
PY
  # A plan at its bound within rounding (the sums taken in another order) is a gap of 0.0 %, as
  # octoplan prints it, not -0.0 %.
  python3 - "$work/bench.json" "$work/at-bound.json" <<'PY' || fail "writing the at-bound run"
import json, sys
bench = json.load(open(sys.argv[1]))
run = bench["cases"][0]["runs"]["0.2"]
run["tuned_ms"] = run["bound_ms"] * (1 - 1e-13)
json.dump(bench, open(sys.argv[2], "w"))
PY
  scripts/bench-bound --from-json "$work/at-bound.json" >"$work/at-bound.out" 2>&1 || fail "bench-bound --from-json"
  grep -q -- "-0.0%" "$work/at-bound.out" && fail "a plan at its bound shows a gap of -0.0 %: $(cat "$work/at-bound.out")"
  grep -q " 0.0% " "$work/at-bound.out" || fail "no gap of 0.0 %: $(cat "$work/at-bound.out")"
  expect_fail "--case with a missing cost file" "cost file .*nowhere.yaml does not exist" \
    scripts/bench-bound --octoplan "$octoplan" --bounds-only --case tiny-hybrid "$work/nowhere.yaml" 1
  expect_fail "--case with a bad TP" "TP 'two' is not a positive integer" \
    scripts/bench-bound --octoplan "$octoplan" --bounds-only --case tiny-hybrid "$work/tiny-costs.yaml" two
  expect_fail "--case with a TP that is a digit but no number" "is not a positive integer" \
    scripts/bench-bound --octoplan "$octoplan" --bounds-only --case tiny-hybrid "$work/tiny-costs.yaml" ²
  # Malformed options and saved runs are named errors, not tracebacks.
  expect_fail "--budgets abc" "argument --budgets: 'abc'" scripts/bench-bound --budgets abc
  expect_fail "--pp 4," "argument --pp: '4,'" scripts/bench-bound --bounds-only --pp 4,
  printf '{' >"$work/bad.json"
  expect_fail "bench-bound --from-json of broken JSON" "bad.json: not JSON" scripts/bench-bound --from-json "$work/bad.json"
  expect_fail "bench-tuner --from-json of broken JSON" "bad.json: not JSON" scripts/bench-tuner --from-json "$work/bad.json"
  printf '{}' >"$work/bad.json"
  expect_fail "bench-bound --from-json of {}" "not a run saved by bench-bound --json" \
    scripts/bench-bound --from-json "$work/bad.json"
  expect_fail "bench-tuner --from-json of {}" "not a run saved by bench-tuner --json" \
    scripts/bench-tuner --from-json "$work/bad.json"
  printf '{"budgets": [1], "load": ["0"], "cases": [{"class": "c"}]}' >"$work/bad.json"
  expect_fail "bench-bound --from-json, a case without runs" "a case lacks a field" \
    scripts/bench-bound --from-json "$work/bad.json"
  expect_fail "bench-bound --from-json of a folder" "is a folder" scripts/bench-bound --from-json "$work"
  ;;
make-cost-profile)
  # scripts/make-cost-profile: the profile octoplan reads, W folded into B with --fuse-w (the same
  # seed's split profile, re-added per layer, is the oracle), and its output written like
  # octoplan's: bad input leaves an existing file intact, a folder is not replaced, no temp left.
  mk() { scripts/make-cost-profile --octoplan "$octoplan" profiles/models/tiny-hybrid.yaml --tp 1 --seed 5 "$@"; }
  mk -o "$work/split.yaml" || fail "make-cost-profile (W split)"
  mk -o "$work/fused.yaml" --fuse-w || fail "make-cost-profile --fuse-w"
  python3 - "$work/split.yaml" "$work/fused.yaml" <<'PY' || fail "fused profile"
import sys, yaml
split, fused = (yaml.safe_load(open(p))["layers"] for p in sys.argv[1:])
assert len(split) == len(fused) > 2, (len(split), len(fused))
assert any(l["w_ms"] > 0 for l in split), "the split profile has no W"
for s, f in zip(split, fused):
    assert f["w_ms"] == 0 and abs(f["b_ms"] - (s["b_ms"] + s["w_ms"])) <= 2e-6, (s, f)
    assert f["f_ms"] == s["f_ms"], (s, f)
PY
  for costs in split fused; do
    "$octoplan" baseline profiles/models/tiny-hybrid.yaml --costs "$work/$costs.yaml" --pp 2 --microbatches 4 \
      --schedule 1f1b --partition balanced -o "$work/$costs.plan.json" >/dev/null || fail "octoplan reads $costs.yaml"
  done
  cp "$work/split.yaml" "$work/keep.yaml"
  expect_fail "make-cost-profile of a missing model" "nowhere.yaml" \
    scripts/make-cost-profile --octoplan "$octoplan" "$work/nowhere.yaml" -o "$work/split.yaml"
  cmp -s "$work/split.yaml" "$work/keep.yaml" || fail "a failed make-cost-profile changed its output"
  # Its own input as the output (also through a link) was replaced by the profile; values octoplan
  # refuses (a jitter of 2: negative times) were written with exit 0.
  cp profiles/models/tiny-hybrid.yaml "$work/model.yaml"
  ln -s model.yaml "$work/model-link.yaml"
  for out in model.yaml model-link.yaml; do
    expect_fail "make-cost-profile over its model ($out)" "is an input of this command" \
      scripts/make-cost-profile --octoplan "$octoplan" "$work/model.yaml" -o "$work/$out"
  done
  cmp -s "$work/model.yaml" profiles/models/tiny-hybrid.yaml || fail "make-cost-profile replaced its model"
  for bad in "--jitter 2" "--overhead-ms -1" "--p2p-gbs 0" "--tp 0"; do
    expect_fail "make-cost-profile $bad" "argument --" mk -o "$work/split.yaml" $bad
  done
  expect_fail "make-cost-profile, a newline in --device" "argument --device" \
    mk -o "$work/split.yaml" --device "$(printf 'x\nsource: measured')"
  cmp -s "$work/split.yaml" "$work/keep.yaml" || fail "a refused make-cost-profile changed its output"
  mkdir "$work/folder"
  expect_fail "make-cost-profile over a folder" "not a regular file" mk -o "$work/folder"
  [[ -d $work/folder ]] || fail "the folder was replaced"
  mk -o "$work/folder" 2>/dev/null
  [[ $? -eq 4 ]] || fail "an output that cannot be written: exit code is not 4"
  expect_fail "bench-bound --json into a missing folder" "does not exist" \
    scripts/bench-bound --octoplan "$octoplan" --bounds-only --json "$work/none/run.json"
  # The four scripts that run octoplan find it one way (scripts/octoplan_binary.py): a --octoplan
  # that is not an executable file is named, not run into a traceback.
  for script in bench-bound bench-tuner bench-parallel make-cost-profile fuzz-bounds; do
    args=(--octoplan "$work/keep.yaml")
    [[ $script == make-cost-profile ]] && args+=(profiles/models/tiny-hybrid.yaml -o "$work/x.yaml")
    [[ $script == bench-bound ]] && args+=(--bounds-only)
    expect_fail "$script with a --octoplan that is no program" "$script: --octoplan .*keep.yaml: not an executable file" \
      scripts/$script "${args[@]}"
  done
  ls -A "$work" | grep -q "tmp" && fail "a temporary file was left: $(ls -A "$work")"
  ;;
fuzz-bounds)
  # scripts/fuzz-bounds: random inputs through the command line, every report's bounds against its
  # plan. A few cases pass on this build; through an octoplan whose plans claim a bound above their
  # iteration time (a wrapper that rewrites the written plan) the script fails and keeps the inputs.
  scripts/fuzz-bounds --octoplan "$octoplan" --cases 4 --seed 3 --budget 0.05 --keep "$work/kept" \
    >"$work/fuzz.out" 2>&1 || fail "fuzz-bounds on this build: $(cat "$work/fuzz.out")"
  grep -Eq "^4 random cases \(seed 3\): [0-9]+ plans written or refused, [1-9][0-9]* bounds checked, 0 above" \
    "$work/fuzz.out" || fail "fuzz-bounds summary: $(cat "$work/fuzz.out")"
  cat >"$work/inflating-octoplan" <<SH
#!/usr/bin/env bash
"$octoplan" "\$@" || exit \$?
out=""; prev=""
for a in "\$@"; do [[ \$prev == -o ]] && out=\$a; prev=\$a; done
[[ \$out == *.json ]] || exit 0  # a plan (make-cost-profile's estimate writes YAML)
python3 - "\$out" <<'PY'
import json, sys
plan = json.load(open(sys.argv[1]))
p = plan["predicted"]
if "lower_bound_ms" in p:
    p["lower_bound_ms"] = p["iteration_time_ms"] * 1.01
json.dump(plan, open(sys.argv[1], "w"))
PY
SH
  chmod +x "$work/inflating-octoplan"
  scripts/fuzz-bounds --octoplan "$work/inflating-octoplan" --cases 2 --seed 3 --budget 0.05 --keep "$work/kept2" \
    >"$work/fuzz2.out" 2>&1
  [[ $? -eq 1 ]] || fail "fuzz-bounds did not fail on bounds above the iteration: $(cat "$work/fuzz2.out")"
  grep -q "FAILED .*lower_bound_ms .* > iteration_time_ms" "$work/fuzz2.out" || fail "no FAILED line: $(cat "$work/fuzz2.out")"
  ls "$work"/kept2/case*/model.yaml >/dev/null 2>&1 || fail "the failing inputs were not kept"
  # Its own options are checked before anything runs.
  expect_fail "fuzz-bounds --cases 0" "fuzz-bounds: --cases 0: expected at least 1" \
    scripts/fuzz-bounds --octoplan "$octoplan" --cases 0
  expect_fail "fuzz-bounds --budget 0" "fuzz-bounds: --budget 0.0: expected a number of seconds > 0" \
    scripts/fuzz-bounds --octoplan "$octoplan" --budget 0
  echo keep >"$work/a-file"
  expect_fail "fuzz-bounds --keep onto a file" "fuzz-bounds: --keep .*a-file: not a folder" \
    scripts/fuzz-bounds --octoplan "$octoplan" --cases 1 --keep "$work/a-file"
  [[ $(cat "$work/a-file") == keep ]] || fail "fuzz-bounds changed the file given as --keep"
  ;;
*) fail "unknown case $case_name" ;;
esac
echo "PASS $case_name"
