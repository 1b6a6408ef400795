#!/usr/bin/env bash
# Run the device check on a GPU machine from the checkout's root, with what scripts/device_prep.sh put in
# .device/ (wheels installed for the parts only, Wikipedia shards for part glu; each used when present):
#   bash scripts/device_check.sh             # ~8 min; report.json, report.md, device_check.log in $OUT
#   PARTS="train glu" bash scripts/device_check.sh    # re-run some parts (the others' results stay in $WORK)
#   DRY=1 OUT=/tmp/dc bash scripts/device_check.sh    # the same script on a CPU at tiny sizes
# WHEELS=DIR and DATA=DIR point elsewhere than .device/ (the tests: DATA=../shared/data/wikipedia-en).
set -o pipefail
OUT=${OUT:-device_check}
WORK=${WORK:-${TMPDIR:-/tmp}/ffnzoo-device${DRY:+-dry}}
mkdir -p "$OUT"
WHEELS=${WHEELS:-.device/wheels}   # scripts/device_prep.sh fills both
DATA=${DATA:-.device/wikipedia-en}
args=()
[ -d "$WHEELS" ] && args+=(--wheels "$WHEELS")
[ -d "$DATA" ] && args+=(--data "$DATA")
command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
PYTHONUNBUFFERED=1 python3 -m ffn_zoo.tools.device_check ${DRY:+--dry-run} --out "$OUT" --work "$WORK" "${args[@]}" \
    --parts ${PARTS:-env gemm step train glu} 2>&1 | tee "$OUT/device_check.log"
