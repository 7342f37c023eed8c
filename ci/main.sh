#!/usr/bin/env bash
# ci/main.sh: THE main command (README): installs what building cubert needs
# (Debian 12; apt, only what is missing), builds the tool once in build-main/
# (again only when sources changed), and runs the main job on the host
# backend: `cubert info`, then the fault-injection scenario suite and a short
# campaign (`cubert faultinj`) on simulated Frontier and MI300X nodes.
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
# The fault-injection scenario suite and a short seeded campaign on the
# embedded default: the host backend with the simulated Frontier node
# (8 GCDs: XGMI and SYS pairs), then the MI300X node (all XGMI).
main_faultinj() {
  env -u CUBERT_FAULTS CUBERT_BACKENDS=host CUBERT_HOST_NODE=frontier "$TOOL" faultinj &&
    env -u CUBERT_FAULTS CUBERT_BACKENDS=host CUBERT_HOST_NODE=mi300x "$TOOL" faultinj suite
}

cb_stage deps main_deps || { cb_summary; exit 1; }
cb_stage build main_build || { cb_summary; exit 1; }
cb_stage info main_info
cb_stage faultinj main_faultinj
cb_summary
