#!/usr/bin/env bash
# device-check.sh: what a lent NVIDIA GPU must show, in one command from
# the repository root, with prebuilt binaries (a bare machine has no Go; see
# bench/DEVICE-CHECK.md for how to build them, what to carry and what each
# number means), within one deadline for the whole run:
#
#   bash bench/device-check.sh OUTDIR
#
#   preflight  the NVIDIA driver, the Vulkan loader (unpacked from carried
#              .deb files where the machine lacks it) and the NVIDIA ICD
#              (written from libGLX_nvidia.so.0 when only its manifest is
#              missing); VK_DRIVER_FILES and VK_ICD_FILENAMES exported.
#              Without an NVIDIA Vulkan driver it stops here, exit 3.
#   negative   the negative control: umbra probe --backend vulkan with no
#              ICD at all must refuse (exit 1, no adapter that works), so a
#              pass below cannot come from something other than the driver.
#   check      bench --device-check: one process, one probe, the data made
#              once on every core, steps by value under what is left of the
#              deadline (probe and the NVIDIA adapter; float32 upload and
#              batches of 1, 64, 256 and 1,024 at 4,000,000 × 768, every
#              sampled answer against float64; the read floor as a share
#              of the card's bandwidth; int8 and float16; both batch kernels
#              and the radix select; a soak if time is left), every search
#              on the GPU, nvidia-smi sampled throughout.
#
# Everything goes to OUTDIR: preflight.txt, negative.json, report.json,
# summary.txt (a line a step and each assertion), check.log.
# Exit status: 0 passed, 1 failed (summary.txt says what), 2 bad usage or
# missing binaries, 3 no NVIDIA Vulkan driver, 4 no NVIDIA hardware
# adapter (a software one is refused, never measured).
#
# Environment:
#   UMBRA_BIN             folder with umbra and bench (default bench-bin)
#   UMBRA_BIN_TGZ         the same folder as a .tgz, unpacked into UMBRA_BIN
#                         when that holds no binaries (default bench-bin.tgz)
#   UMBRA_VULKAN_DEBS     .deb files holding libvulkan1, unpacked into a
#                         private folder when the machine lacks
#                         libvulkan.so.1 (default .gl)
#   UMBRA_CHECK_DEADLINE  seconds for the whole run, this script's included
#                         (default 420: 7 minutes)
#   UMBRA_CHECK_ROWS, UMBRA_CHECK_DIM, UMBRA_CHECK_BATCHES
#                         (default 4000000, 768, "1,64,256,1024")
#   UMBRA_CHECK_SOAK      the soak's most (default 30s)
#   UMBRA_CHECK_PEAK_GBPS the card's memory bandwidth (default: by its name)
#   UMBRA_CHECK_SOFTWARE=1  smoke run only (CI): accept a software adapter,
#                         skip the NVIDIA preflight and assertions. Never on
#                         a GPU machine: the results would be lavapipe's.
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
deadline=${UMBRA_CHECK_DEADLINE:-420}
software=${UMBRA_CHECK_SOFTWARE:-0}

say() { echo "device-check: $*" | tee -a "$out/check.log" >&2; }

# The binaries may come compressed (two stripped ones pass the device
# tool's 64 MiB carry limit beside the working tree).
if [[ ! -x $bin/bench && -f ${UMBRA_BIN_TGZ:-bench-bin.tgz} ]]; then
  mkdir -p "$bin" && tar xzf "${UMBRA_BIN_TGZ:-bench-bin.tgz}" -C "$bin" --strip-components=1 || exit 2
fi
for b in umbra bench; do
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
  echo "cpus: $(nproc)"
  echo "binaries: $(cd "$bin" && sha256sum umbra bench | tr '\n' ' ')"
} >"$pre"

# The Vulkan loader: wgpu opens libvulkan.so.1 at run time. A machine with
# only the NVIDIA driver may lack it: unpack the carried .deb files into a
# private prefix (never over /). (grep reads all of ldconfig's output: with
# -q, pipefail would see ldconfig's SIGPIPE as a failure.)
if ! ldconfig -p 2>/dev/null | grep 'libvulkan\.so\.1' >/dev/null; then
  debs=${UMBRA_VULKAN_DEBS:-.gl}
  if ! ls "$debs"/*.deb >/dev/null 2>&1; then
    say "no Vulkan loader: libvulkan.so.1 is not installed and $debs holds no .deb files (bench/DEVICE-CHECK.md)"
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

smoke=()
if [[ $software != 1 ]]; then
  # The driver: the kernel module and its user-space Vulkan library.
  if [[ -r /proc/driver/nvidia/version ]]; then
    sed 's/^/driver: /' /proc/driver/nvidia/version >>"$pre"
  fi
  nvidia-smi --query-gpu=name,pci.device_id,driver_version,memory.total,clocks.max.sm,clocks.max.mem --format=csv,noheader >>"$pre" 2>&1 || true
  if [[ ! -r /proc/driver/nvidia/version ]] && ! command -v nvidia-smi >/dev/null; then
    say "no NVIDIA driver: neither /proc/driver/nvidia/version nor nvidia-smi"
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
    cat >"$icd" <<EOF
{ "file_format_version": "1.0.0", "ICD": { "library_path": "$glx", "api_version": "1.3.0" } }
EOF
    echo "icd: synthesized $icd for $glx" >>"$pre"
  fi
  if [[ -z $icd || ! -f $icd ]]; then
    say "no NVIDIA Vulkan driver: no nvidia_icd.json and no libGLX_nvidia.so.0 (a container needs NVIDIA_DRIVER_CAPABILITIES to include graphics)"
    exit 3
  fi
  export VK_DRIVER_FILES=$icd VK_ICD_FILENAMES=$icd
  echo "icd: $icd" >>"$pre"
  cat "$icd" >>"$pre" 2>/dev/null
else
  echo "smoke: UMBRA_CHECK_SOFTWARE=1, software adapters accepted, no NVIDIA preflight or assertions" >>"$pre"
  smoke=(--check-smoke)
fi
say "preflight done (${SECONDS}s)"

# ---- negative control: no ICD, no adapter --------------------------------
# With an ICD list naming nothing, the loader finds no Vulkan driver: the
# probe must say so (exit 1) and report no adapter that works. If it did
# find one, whatever answers the check below would not be the driver's.
none=$out/no-icd.json
VK_DRIVER_FILES=$none VK_ICD_FILENAMES=$none timeout 60 "$bin/umbra" probe --backend vulkan --json >"$out/negative.json" 2>"$out/negative.txt"
nrc=$?
works=$(grep -c '"works": true' "$out/negative.json")
if [[ $nrc -ne 1 || $works -ne 0 ]]; then
  negative="FAIL: with no ICD the probe exited $nrc with $works working adapter(s) (negative.json)"
else
  negative="ok: with no ICD the probe refuses (exit 1, no working adapter)"
fi
say "negative control $negative"

# ---- the check, within what is left of the deadline ---------------------
left=$((deadline - SECONDS - 5))
if ((left < 30)); then
  say "only ${left}s left of the ${deadline}s deadline after the preflight"
  exit 1
fi
say "check: ${left}s left"
"$bin/bench" --device-check "$out" --check-deadline "${left}s" "${smoke[@]}" --seed 42 \
  --check-rows "${UMBRA_CHECK_ROWS:-4000000}" --check-dim "${UMBRA_CHECK_DIM:-768}" \
  --check-batches "${UMBRA_CHECK_BATCHES:-1,64,256,1024}" --check-soak "${UMBRA_CHECK_SOAK:-30s}" \
  --check-peak-gbps "${UMBRA_CHECK_PEAK_GBPS:-0}" --check-negative "$negative" >>"$out/check.log" 2>&1
rc=$?
cat "$out/summary.txt" >&2
say "done in ${SECONDS}s (deadline ${deadline}s)"
if grep -q '^assert nvidia adapter *FAIL' "$out/summary.txt"; then
  exit 4
fi
exit $((rc != 0))
