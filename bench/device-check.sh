#!/usr/bin/env bash
# device-check.sh: what a real NVIDIA GPU is lent for, in one command from
# the repository root, with prebuilt binaries (a bare machine has no Go; see
# bench/DEVICE-CHECK.md for how to build them and what to carry):
#
#   bash bench/device-check.sh OUTDIR
#
# Steps, each under its own timeout, each writing OUTDIR/<step>.txt (and
# .json where it has one), each listed with its exit status in
# OUTDIR/summary.txt:
#   preflight   the NVIDIA driver, the Vulkan loader and the NVIDIA ICD
#               (synthesized from libGLX_nvidia.so.0 when only its JSON is
#               missing); VK_DRIVER_FILES and VK_ICD_FILENAMES exported.
#               Without an NVIDIA Vulkan driver it stops here, exit 3.
#   probe       umbra probe --json: the adapters, their limits and verdicts;
#               exit 4 when Auto would use no hardware adapter (a software
#               adapter such as lavapipe is refused, never measured).
#   soak        cmd/bench --soak (30 s): mixed searches and writes, every
#               answer checked.
#   check-N-P   gpu.test TestDeviceCheck at N rows × 768, precision P (f32,
#               f16, int8): every path's answers (fused and radix, k = 10
#               and 1,000, batches 1/8/64/128; quant.wgsl's sums) compared
#               with the CPU's.
#   bench-N-kK  cmd/bench's kernel and resident tiers and --paths
#               1,8,64,128 (timings; query 0 of each tier checked).
#   filter-N    cmd/bench --filter 0.001,0.01,0.1 on the GPU: a Where
#               admitting each share beside the unfiltered search and an
#               index of the share alone (gather.wgsl or the scan, as the
#               device's measured costs choose; every answer checked
#               against the subset index's).
# Exit status: 0 when every step passed, 1 when one failed (see
# summary.txt), 2 for bad usage or missing binaries, 3 no NVIDIA Vulkan
# driver, 4 no hardware adapter.
#
# Environment:
#   UMBRA_BIN            folder with umbra, bench and gpu.test (default bench-bin)
#   UMBRA_VULKAN_DEBS    .deb files holding libvulkan1, unpacked into a
#                        private folder when the machine lacks libvulkan.so.1
#                        (default .gl)
#   UMBRA_CHECK_SIZES    rows per size (default "50000 4000000")
#   UMBRA_CHECK_DIM      dimension (default 768)
#   UMBRA_CHECK_KS       k values (default "10 1000")
#   UMBRA_CHECK_BATCHES  batch sizes (default "1 8 64 128")
#   UMBRA_CHECK_PRECISIONS  (default "f32 f16 int8")
#   UMBRA_CHECK_SOAK     soak duration (default 30s)
#   UMBRA_CHECK_TIMEOUT  seconds per step (default 300)
#   UMBRA_CHECK_SOFTWARE=1  smoke run only (CI): accept a software adapter
#                        and skip the NVIDIA preflight. Never set it on a
#                        GPU machine: the results would be lavapipe's.
set -uo pipefail
cd "$(dirname "$0")/.."

if [[ $# -ne 1 ]]; then
  echo "usage: bash bench/device-check.sh OUTDIR" >&2
  exit 2
fi
out=$1
mkdir -p "$out" || exit 2
out=$(cd "$out" && pwd)
bin=${UMBRA_BIN:-bench-bin}
sizes=${UMBRA_CHECK_SIZES:-50000 4000000}
dim=${UMBRA_CHECK_DIM:-768}
ks=${UMBRA_CHECK_KS:-10 1000}
batches=${UMBRA_CHECK_BATCHES:-1 8 64 128}
precisions=${UMBRA_CHECK_PRECISIONS:-f32 f16 int8}
soak=${UMBRA_CHECK_SOAK:-30s}
limit=${UMBRA_CHECK_TIMEOUT:-300}
software=${UMBRA_CHECK_SOFTWARE:-0}
summary=$out/summary.txt
: >"$summary"

say() { echo "device-check: $*" | tee -a "$out/device-check.log" >&2; }
record() { printf '%-24s %s\n' "$1" "$2" >>"$summary"; }

for b in umbra bench gpu.test; do
  if [[ ! -x $bin/$b ]]; then
    say "no $bin/$b: build the binaries first (bench/DEVICE-CHECK.md)"
    exit 2
  fi
done

# ---- preflight -------------------------------------------------------
pre=$out/preflight.txt
{
  echo "date: $(date -u +%FT%TZ)"
  echo "host: $(uname -a)"
  echo "binaries: $(cd "$bin" && sha256sum umbra bench gpu.test | tr '\n' ' ')"
} >"$pre"

# The Vulkan loader: wgpu opens libvulkan.so.1 at run time. A machine with
# only the NVIDIA driver may lack it: unpack the carried .deb files into a
# private prefix (never over /). (grep reads all of ldconfig's output: with
# -q, pipefail would see ldconfig's SIGPIPE as a failure.)
if ! ldconfig -p 2>/dev/null | grep 'libvulkan\.so\.1' >/dev/null; then
  debs=${UMBRA_VULKAN_DEBS:-.gl}
  if ! ls "$debs"/*.deb >/dev/null 2>&1; then
    say "no Vulkan loader: libvulkan.so.1 is not installed and $debs holds no .deb files (bench/DEVICE-CHECK.md)"
    record preflight "FAIL (no Vulkan loader)"
    exit 3
  fi
  prefix=$out/vulkan-loader
  mkdir -p "$prefix"
  for f in "$debs"/*.deb; do dpkg -x "$f" "$prefix"; done
  export LD_LIBRARY_PATH="$prefix/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  echo "loader: unpacked from $debs under $prefix" >>"$pre"
else
  echo "loader: $(ldconfig -p | grep 'libvulkan\.so\.1' | head -n 1)" >>"$pre"
fi

if [[ $software != 1 ]]; then
  # The driver: the kernel module and its user-space Vulkan library.
  if [[ -r /proc/driver/nvidia/version ]]; then
    sed 's/^/driver: /' /proc/driver/nvidia/version >>"$pre"
  fi
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv,noheader >>"$pre" 2>&1 || true
  if [[ ! -r /proc/driver/nvidia/version ]] && ! command -v nvidia-smi >/dev/null; then
    say "no NVIDIA driver: neither /proc/driver/nvidia/version nor nvidia-smi"
    record preflight "FAIL (no NVIDIA driver)"
    exit 3
  fi
  glx=
  for d in $(ldconfig -p 2>/dev/null | awk '/libGLX_nvidia\.so\.0/ {print $NF}') \
    /usr/lib/x86_64-linux-gnu/libGLX_nvidia.so.0 /usr/lib64/libGLX_nvidia.so.0 /usr/local/nvidia/lib64/libGLX_nvidia.so.0; do
    if [[ -e $d ]]; then glx=$d; break; fi
  done
  icd=${VK_DRIVER_FILES:-${VK_ICD_FILENAMES:-}}
  if [[ -z $icd ]]; then
    for f in /etc/vulkan/icd.d/nvidia_icd.json /usr/share/vulkan/icd.d/nvidia_icd.json \
      /usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json /usr/share/vulkan/icd.d/nvidia_icd.x86_64.json; do
      if [[ -f $f ]]; then icd=$f; break; fi
    done
  fi
  if [[ -z $icd && -n $glx ]]; then
    # The driver's Vulkan library is there but not its manifest (a
    # container started without the graphics capability mounts neither,
    # a partial one only the library): write the manifest ourselves.
    icd=$out/nvidia_icd.json
    api=1.3.0
    cat >"$icd" <<EOF
{ "file_format_version": "1.0.0", "ICD": { "library_path": "$glx", "api_version": "$api" } }
EOF
    echo "icd: synthesized $icd for $glx" >>"$pre"
  fi
  if [[ -z $icd || ! -f $icd ]]; then
    say "no NVIDIA Vulkan driver: no nvidia_icd.json and no libGLX_nvidia.so.0 (a container needs NVIDIA_DRIVER_CAPABILITIES to include graphics)"
    record preflight "FAIL (no NVIDIA Vulkan driver)"
    exit 3
  fi
  export VK_DRIVER_FILES=$icd VK_ICD_FILENAMES=$icd
  echo "icd: $icd" >>"$pre"
  cat "$icd" >>"$pre" 2>/dev/null
else
  echo "smoke: UMBRA_CHECK_SOFTWARE=1, software adapters accepted, no NVIDIA preflight" >>"$pre"
fi
record preflight ok

# step NAME CMD...: runs CMD under the per-step timeout, its output in
# OUTDIR/NAME.txt, and records its verdict.
status=0
step() {
  local name=$1
  shift
  say "$name"
  local start=$SECONDS
  timeout --kill-after=15 "$limit" "$@" >"$out/$name.txt" 2>&1
  local rc=$?
  local took=$((SECONDS - start))
  if [[ $rc -eq 0 ]]; then
    record "$name" "ok (${took}s)"
  else
    [[ $rc -eq 124 || $rc -eq 137 ]] && rc="$rc, timed out after ${limit}s"
    record "$name" "FAIL (exit $rc, ${took}s)"
    say "$name failed (exit $rc): see $out/$name.txt"
    tail -n 20 "$out/$name.txt" >&2
    status=1
  fi
  return 0
}

# ---- probe: a hardware adapter or nothing ------------------------------
timeout 120 "$bin/umbra" probe --json >"$out/probe.json" 2>"$out/probe.txt"
rc=$?
if [[ $software != 1 ]]; then
  # umbra probe exits 1 when Auto would use no adapter, and Auto never
  # uses a software one.
  if [[ $rc -ne 0 ]]; then
    say "no hardware adapter that Auto would use (exit $rc): see $out/probe.json and $out/probe.txt"
    record probe "FAIL (no hardware adapter)"
    exit 4
  fi
  device=(--device auto)
else
  device=(--device gpu)
fi
record probe "ok (exit $rc)"

# ---- soak: every answer checked ------------------------------------------
step soak "$bin/bench" "${device[@]}" --soak "$soak" --n 50000 --dim "$dim" --k 10 --seed 42

# ---- answers of every path at each size and precision ----------------------
for n in $sizes; do
  for p in $precisions; do
    step "check-$n-$p" env UMBRA_CHECK_ROWS="$n" UMBRA_CHECK_DIM="$dim" UMBRA_CHECK_KS="$ks" \
      UMBRA_CHECK_BATCHES="$batches" UMBRA_CHECK_PRECISION="$p" UMBRA_CHECK_SOFTWARE="$software" \
      UMBRA_CHECK_OUT="$out/check-$n-$p.json" \
      "$bin/gpu.test" -test.run '^TestDeviceCheck$' -test.v -test.count=1 -test.timeout "${limit}s"
  done
done

# ---- timings ------------------------------------------------------------------
paths=$(echo "$batches" | tr ' ' ',')
for n in $sizes; do
  for k in $ks; do
    # The fallback tier is left out (a CPU scan of 4,000,000 × 768 takes
    # seconds per query); few groups keep each run to a minute or two.
    step "bench-$n-k$k" "$bin/bench" "${device[@]}" --n "$n" --dim "$dim" --k "$k" --nq 64 --metric dot \
      --tiers kernel,resident --runs 5 --repeat 3 --warmup 1 --reps 5 --paths "$paths" \
      --seed 42 --json "$out/bench-$n-k$k.json"
  done
done

# ---- filtered searches: gather or scan ---------------------------------------
for n in $sizes; do
  step "filter-$n" "$bin/bench" --device gpu --n "$n" --dim "$dim" --k 10 --metric cosine \
    --filter 0.001,0.01,0.1 --runs 5 --repeat 3 --seed 42
done

say "results in $out (took ${SECONDS}s)"
cat "$summary" >&2
exit $status
