#!/usr/bin/env bash
# Regenerates the example plans of this folder (a test checks they stay in sync with octoplan).
# Usage: plans/regenerate.sh [OUT_DIR]   (default: plans/); OCTOPLAN=path/to/octoplan to override.
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-plans}
octoplan=${OCTOPLAN:-build/bin/octoplan}
mkdir -p "$out"

# tiny-hybrid on 2 CPU ranks: runs with `mpirun -np 2 build/bin/octorun plans/tiny-hybrid.1f1b.cpu2.json`.
"$octoplan" baseline profiles/models/tiny-hybrid.yaml --cluster profiles/clusters/cpu-local.yaml \
  --schedule 1f1b --pp 2 --microbatches 4 -o "$out/tiny-hybrid.1f1b.cpu2.json"
"$octoplan" baseline profiles/models/tiny-hybrid.yaml --cluster profiles/clusters/cpu-local.yaml \
  --schedule zb-v --pp 2 --microbatches 4 -o "$out/tiny-hybrid.zb-v.cpu2.json"
# Nemotron-H-8B on the default H100 node, PP 4, 8 micro-batches: Megatron's interleaved 1F1B on
# its uniform split, the baseline users run today. It needs 92 GiB on device 0, more than the
# 80 GiB of an H100 without recompute: written anyway, and marked so, to show what users run.
"$octoplan" baseline profiles/models/nemotron-h-8b.yaml --schedule interleaved --partition uniform \
  --pp 4 --microbatches 8 --allow-oversubscribed-memory -o "$out/nemotron-h-8b.interleaved-uniform.pp4.json"
