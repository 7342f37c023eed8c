#!/usr/bin/env bash
# ci/layer-calls.sh BUILD_DIR: no layer of libcubert calls a function of a
# layer above it (docs/architecture.md). Reads BUILD_DIR/layers/order.txt
# (the layers bottom up and their object folders, written by CMakeLists.txt)
# and checks with nm that every cb_/cubert_ symbol a layer's objects use is
# defined by that layer or one below it. The library must be built.
set -uo pipefail
build=${1:?usage: ci/layer-calls.sh BUILD_DIR}
order=$build/layers/order.txt
[ -s "$order" ] || { echo "layer-calls: no $order (configure first)"; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
: >"$tmp/below"
rc=0
while read -r layer dir; do
  objs=$(find "$dir" -name '*.o' 2>/dev/null)
  if [ -z "$objs" ]; then
    echo "layer-calls: $layer has no objects in $dir (not built?)"
    rc=1
    continue
  fi
  # shellcheck disable=SC2086 # a list of object files
  nm --defined-only $objs | awk '$2 ~ /[TDBR]/ {print $3}' | sort -u >"$tmp/def"
  # shellcheck disable=SC2086
  nm -u $objs | awk '{print $2}' | grep -E '^(cb_|cubert_)' | sort -u >"$tmp/used"
  sort -u "$tmp/def" "$tmp/below" >"$tmp/avail"
  up=$(comm -23 "$tmp/used" "$tmp/avail" | tr '\n' ' ')
  if [ -n "$up" ]; then
    echo "layer-calls: $layer calls up (or outside the library): $up"
    rc=1
  else
    echo "layer-calls: $layer calls only itself and the layers below"
  fi
  cp "$tmp/avail" "$tmp/below"
done <"$order"
exit "$rc"
