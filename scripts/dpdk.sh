#!/usr/bin/env bash
# DPDK for the `dpdk` cargo feature: Debian's libdpdk-dev (22.11; its memif and af_packet
# drivers come with it), libclang-dev, which bindgen needs to read DPDK's headers, and iproute2
# (`ip`), with which a test builds network namespaces and veth pairs. Installed with apt when
# missing and this runs as root; otherwise says what to run. Idempotent.
set -euo pipefail

need=()
for pkg in libdpdk-dev libclang-dev iproute2; do
  dpkg -s "$pkg" >/dev/null 2>&1 || need+=("$pkg")
done
if [ ${#need[@]} -eq 0 ]; then
  exit 0
fi
if [ "$(id -u)" -ne 0 ]; then
  echo "note: the DPDK tests need ${need[*]}: sudo apt-get install ${need[*]}" \
       "(without them they say so and skip, except under CI=true)" >&2
  exit 0
fi
echo "installing: ${need[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${need[@]}"
