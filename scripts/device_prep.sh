#!/usr/bin/env bash
# Prepare a GPU machine that has no network (and no Hydra): run here, in the checkout's root, then copy the
# checkout together with the git-ignored .device/ it fills (~19 MB) to that machine and run
# scripts/device_check.sh there. .device/ holds
#   wheels/          hydra-core, omegaconf, antlr4 (pure Python), the versions this environment runs
#   wikipedia-en/    the first 5 train shards (~12.6 M BPE tokens) + the validation shard, for part glu
# WIKI=DIR names the shards' folder (default: the data=wikipedia default, ../shared/data/wikipedia-en).
set -euo pipefail
cd "$(dirname "$0")/.."
src=${WIKI:-../shared/data/wikipedia-en}
mkdir -p .device/wheels .device/wikipedia-en
ver() { python -c "import importlib.metadata as m; print(m.version('$1'))"; }
python -m pip download -q --no-deps --only-binary=:all: -d .device/wheels \
    "hydra-core==$(ver hydra-core)" "omegaconf==$(ver omegaconf)"
# antlr4-python3-runtime 4.9.3 is an sdist only: build its pure-Python wheel here
[ -n "$(ls .device/wheels/antlr4* 2>/dev/null)" ] || \
    python -m pip wheel -q --no-deps -w .device/wheels "antlr4-python3-runtime==$(ver antlr4-python3-runtime)"
for f in "$src"/train-0000[0-4].jsonl.gz "$src"/validation-00000.jsonl.gz; do cp -p "$f" .device/wikipedia-en/; done
ls -la .device/wheels .device/wikipedia-en
du -sh .device
git ls-files -co --exclude-standard | xargs -d '\n' du -cb 2>/dev/null | tail -1 | awk '{printf "checkout: %.1f MiB (+ .device)\n", $1/2^20}'
