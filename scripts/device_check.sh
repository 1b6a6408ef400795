#!/usr/bin/env bash
# Runs ON the GPU box (device tool), from the repo root, after scripts/device_prep.sh filled .device/ here:
#   device run  command="bash scripts/device_check.sh"  carry=[".device"]  timeout_s=540
# Parts' budgets sum to 470 s; the report (report.json, report.md, glu_loss_curves.png, device_check.log) lands
# in $OUT. To re-run only some parts: PARTS="train glu" bash scripts/device_check.sh
# Here, on the CPU, the same script end to end at tiny sizes: DRY=1 OUT=/tmp/dc bash scripts/device_check.sh
set -o pipefail
OUT=${OUT:-device_check}
mkdir -p "$OUT"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site \
    .device/wheels/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader || true
python3 -m ffn_zoo.tools.device_check ${DRY:+--dry-run} --out "$OUT" --work /tmp/ffnzoo-device${DRY:+-dry} \
    --parts ${PARTS:-env gemm step train glu} \
    2>&1 | tee "$OUT/device_check.log"
