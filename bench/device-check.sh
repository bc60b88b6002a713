#!/usr/bin/env bash
# device-check.sh: the GPU measurements a real GPU is lent for, in one run of
# well under 4 minutes on a Linux machine with an NVIDIA driver (no Go, no
# Vulkan loader needed on it: see README, "Device check").
#
#   bash bench/device-check.sh [OUTDIR]
#
# For each size (50,000 and 4,000,000 rows × 768, random data) and each k
# (10 and 1,000) it runs cmd/bench on the GPU: the kernel and resident tiers
# with the GPU read floor timed in the same groups, and --paths 1,8,64 (the
# fused selection beside the radix select, with what each issues). Each run
# writes OUTDIR/<n>-k<k>.json and .png and its table to .txt; the default
# OUTDIR is bench/results/device-check-<UTC date>.
#
# Environment:
#   UMBRA_BENCH            a cmd/bench binary (default: go build it; a bare
#                          machine has no Go, so build one beforehand with
#                          `go build -o bench-linux-amd64 ./cmd/bench`)
#   UMBRA_VULKAN_DEBS      a folder of .deb files holding the Vulkan loader
#                          (libvulkan1), unpacked into a private folder when
#                          the machine has no libvulkan.so.1 (default: .gl)
#   UMBRA_CHECK_SIZES      rows per size (default "50000 4000000")
#   UMBRA_CHECK_KS         k values (default "10 1000")
#   UMBRA_CHECK_ARGS       extra cmd/bench flags (e.g. --backend vulkan)
set -euo pipefail
cd "$(dirname "$0")/.."

out=${1:-bench/results/device-check-$(date -u +%Y-%m-%d)}
sizes=${UMBRA_CHECK_SIZES:-50000 4000000}
ks=${UMBRA_CHECK_KS:-10 1000}
mkdir -p "$out"

# The Vulkan loader: wgpu opens libvulkan.so.1 at run time. A bare machine
# with only the NVIDIA driver may lack it; unpack the carried .deb files
# into a private prefix (never over /) and point the dynamic linker there.
# (grep reads all of ldconfig's output: with -q, pipefail would see
# ldconfig's SIGPIPE as a failure.)
if ! ldconfig -p 2>/dev/null | grep 'libvulkan\.so\.1' >/dev/null; then
  debs=${UMBRA_VULKAN_DEBS:-.gl}
  if ! ls "$debs"/*.deb >/dev/null 2>&1; then
    echo "device-check: no libvulkan.so.1 on this machine and no .deb files in $debs (see README, Device check)" >&2
    exit 2
  fi
  prefix=$(mktemp -d)
  for f in "$debs"/*.deb; do dpkg -x "$f" "$prefix"; done
  export LD_LIBRARY_PATH="$prefix/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  echo "device-check: Vulkan loader from $debs, unpacked under $prefix"
fi
# The NVIDIA driver's Vulkan ICD, where a container mounts it outside the
# loader's search path.
if [[ -z ${VK_DRIVER_FILES:-} && -z ${VK_ICD_FILENAMES:-} ]]; then
  for icd in /usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json /usr/share/vulkan/icd.d/nvidia_icd.json \
    /etc/vulkan/icd.d/nvidia_icd.json; do
    if [[ -f $icd ]]; then
      export VK_DRIVER_FILES=$icd
      break
    fi
  done
fi

bench=${UMBRA_BENCH:-}
if [[ -z $bench ]]; then
  bench=$(mktemp -d)/bench
  go build -o "$bench" ./cmd/bench
fi

nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader >"$out/nvidia-smi.txt" 2>&1 || true

status=0
for n in $sizes; do
  for k in $ks; do
    name="$out/$n-k$k"
    echo "device-check: $n × 768, k=$k"
    # Few groups: the GPU's calls take microseconds to milliseconds, and
    # four runs must fit the 4 minutes. The fallback tier is left out (a
    # CPU scan of 4,000,000 × 768 takes seconds per query).
    # shellcheck disable=SC2086
    if ! "$bench" --device gpu --n "$n" --dim 768 --k "$k" --nq 64 --metric dot \
      --tiers kernel,resident --runs 5 --repeat 3 --warmup 1 --reps 5 --paths 1,8,64 \
      --seed 42 --json "$name.json" --plot "$name.png" ${UMBRA_CHECK_ARGS:-} >"$name.txt" 2>&1; then
      echo "device-check: the run at $n, k=$k failed (see $name.txt)" >&2
      status=1
    fi
    tail -n 12 "$name.txt"
  done
done
echo "device-check: results in $out (took ${SECONDS}s)"
exit $status
