#!/usr/bin/env bash
# Prepare a GPU machine that has no network (and no Hydra): run here, in the checkout's root, then copy the
# checkout together with the git-ignored .device/ it fills to that machine and run scripts/device_check.sh there.
# .device/ holds
#   wheels/          hydra-core, omegaconf, antlr4 (pure Python), the versions this environment runs
#   wikipedia-en/    the validation shard and as many train shards (~2.6 M BPE tokens, ~3.6 MB each) as fit beside
#                    the checkout and the wheels in what travels (64 MiB), for part glu's BERT-base ladders
# WIKI=DIR names the shards' folder (default: the data=wikipedia default, ../shared/data/wikipedia-en);
# SHARDS=N copies N train shards (default: as many as fit); LIMIT_MIB=M what travels (default 64).
set -euo pipefail
cd "$(dirname "$0")/.."
src=${WIKI:-../shared/data/wikipedia-en}
limit=$(( ${LIMIT_MIB:-64} * 1024 * 1024 - 2 * 1024 * 1024 ))  # 2 MiB of margin
[ -f "$src/validation-00000.jsonl.gz" ] || { echo "error: no $src/validation-00000.jsonl.gz (WIKI=DIR names the shards)" >&2; exit 1; }
rm -rf .device/wikipedia-en && mkdir -p .device/wheels .device/wikipedia-en
ver() { python -c "import importlib.metadata as m; print(m.version('$1'))"; }
python -m pip download -q --no-deps --only-binary=:all: -d .device/wheels \
    "hydra-core==$(ver hydra-core)" "omegaconf==$(ver omegaconf)"
# antlr4-python3-runtime 4.9.3 is an sdist only: build its pure-Python wheel here
[ -n "$(ls .device/wheels/antlr4* 2>/dev/null)" ] || \
    python -m pip wheel -q --no-deps -w .device/wheels "antlr4-python3-runtime==$(ver antlr4-python3-runtime)"
cp -p "$src/validation-00000.jsonl.gz" .device/wikipedia-en/
checkout=$(git ls-files -co --exclude-standard | xargs -d '\n' du -cb 2>/dev/null | tail -1 | cut -f1)
used=$(( checkout + $(du -sb .device | cut -f1) ))
n=0
for f in "$src"/train-*.jsonl.gz; do
    size=$(stat -c %s "$f")
    if [ -n "${SHARDS:-}" ]; then [ "$n" -ge "$SHARDS" ] && break
    elif [ $(( used + size )) -gt "$limit" ]; then break; fi
    cp -p "$f" .device/wikipedia-en/ && used=$(( used + size )) && n=$(( n + 1 ))
done
ls -la .device/wheels .device/wikipedia-en
echo "$n train shards (~$(( n * 26 / 10 )) M tokens); checkout $(( checkout / 1048576 )) MiB + .device $(du -sm .device | cut -f1) MiB = $(( used / 1048576 )) MiB of ${LIMIT_MIB:-64} MiB"
