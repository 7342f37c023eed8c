#!/usr/bin/env bash
# ci/main.sh: THE main command (README): installs what building cubert needs
# (Debian 12; apt, only what is missing), builds the tool once in build-main/
# (again only when sources changed), and runs the main job on the host
# backend: `cubert info`, then `cubert demo`.
set -uo pipefail
# shellcheck source=ci/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$CB_ROOT" || exit 1

BUILD=${CUBERT_MAIN_BUILD:-$CB_ROOT/build-main}
TOOL=$BUILD/cli/cubert

main_deps() { cb_apt_install "${CB_PACKAGES_BUILD[@]}"; }
main_build() {
  cb_build "$BUILD" -DCMAKE_BUILD_TYPE=Release -DCUBERT_BUILD_TESTS=OFF -DCUBERT_BUILD_BENCH=ON
}
main_info() { "$TOOL" info; }
main_demo() { "$TOOL" demo; }

cb_stage deps main_deps || { cb_summary; exit 1; }
cb_stage build main_build || { cb_summary; exit 1; }
cb_stage info main_info
cb_stage demo main_demo
cb_summary
