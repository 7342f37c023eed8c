#!/usr/bin/env bash
# ci/gpu-kit.sh: builds the GPU kit cubert needs on the NVIDIA H200 machine
# (run here, on the Debian machine, before a GPU run; the kit travels with
# the working tree as the ignored folder .gpu-kit).
#
#   bash ci/gpu-kit.sh KIT_SH [DEST]     KIT_SH: the shared kit builder
#                                         (e.g. ../shared/gpu/kit.sh);
#                                         DEST: default <repo>/.gpu-kit
#
# It runs KIT_SH DEST (HIP 5.2 headers, CUDA 11.8 runtime, hwloc, Check),
# then adds what cubert needs beyond it: jansson (Debian 12's libjansson4 and
# libjansson-dev), headers into DEST/include, the library into DEST/lib and
# jansson.pc into DEST/lib/pkgconfig with its prefix made relative to the
# kit, as the kit does for hwloc. The GPU machine (Ubuntu 24.04, glibc 2.39)
# runs Debian 12's libraries (glibc 2.36) as they are.
# Idempotent: DEST/.complete-jansson marks the addition done.
set -euo pipefail
kit_sh=${1:?usage: gpu-kit.sh KIT_SH [DEST]}
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
dest=${2:-$root/.gpu-kit}

bash "$kit_sh" "$dest"
dest=$(cd "$dest" && pwd)
if [ -f "$dest/.complete-jansson" ]; then
  echo "gpu-kit: jansson already in $dest"
  exit 0
fi

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# The Debian mirror apt already uses (deb822 sources first, then the classic
# list), without the security suite.
mirror=$(grep -hE '^URIs:' /etc/apt/sources.list.d/*.sources 2>/dev/null | awk '{print $2}' |
         grep -v security | head -n1 || true)
if [ -z "$mirror" ]; then
  mirror=$(grep -hE '^deb ' /etc/apt/sources.list 2>/dev/null | grep -v security | awk '{print $2}' |
           head -n1 || true)
fi
[ -n "$mirror" ] || { echo "gpu-kit: no Debian mirror in the apt configuration" >&2; exit 1; }
codename=$(. /etc/os-release && echo "$VERSION_CODENAME")
mkdir -p "$tmp/lists/partial" "$tmp/debs" "$tmp/root"
echo "deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] $mirror $codename main" >"$tmp/sources.list"
apt_opts=(-o "Dir::Etc::SourceList=$tmp/sources.list" -o Dir::Etc::SourceParts=/dev/null
          -o "Dir::State::Lists=$tmp/lists" -o Debug::NoLocking=1)
apt-get "${apt_opts[@]}" update -qq
cd "$tmp/debs"
# apt warns that root downloads unsandboxed: not worth a line
apt-get "${apt_opts[@]}" download -qq libjansson4 libjansson-dev 2>&1 | { grep -v '^W:' || true; }
cd "$root"
for deb in "$tmp"/debs/*.deb; do
  dpkg -x "$deb" "$tmp/root"
done
multiarch=usr/lib/x86_64-linux-gnu
[ -f "$tmp/root/usr/include/jansson.h" ] || { echo "gpu-kit: jansson.h missing from the packages" >&2; exit 1; }
cp -a "$tmp"/root/usr/include/jansson*.h "$dest/include/"
cp -a "$tmp"/root/$multiarch/libjansson.so* "$dest/lib/"
mkdir -p "$dest/lib/pkgconfig"
cp -a "$tmp/root/$multiarch/pkgconfig/jansson.pc" "$dest/lib/pkgconfig/"
sed -i "s|^prefix=.*|prefix=\${pcfiledir}/../..|; s|^exec_prefix=.*|exec_prefix=\${prefix}|;
        s|^libdir=.*|libdir=\${prefix}/lib|; s|^includedir=.*|includedir=\${prefix}/include|" \
  "$dest/lib/pkgconfig/jansson.pc"
# Prove the .pc file resolves inside the kit.
PKG_CONFIG_PATH="$dest/lib/pkgconfig" pkg-config --libs --cflags jansson |
  grep -q -- "-L$dest/lib\|-L$dest/lib/pkgconfig/../../lib" ||
  { echo "gpu-kit: jansson.pc does not point into $dest" >&2; exit 1; }
touch "$dest/.complete-jansson"
echo "gpu-kit: added jansson to $dest"
du -sh "$dest"
