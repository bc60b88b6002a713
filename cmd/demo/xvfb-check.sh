#!/usr/bin/env bash
# xvfb-check.sh: runs the windowed demo on a virtual X server with the
# software Vulkan adapter (lavapipe) and checks what it drew, then does the
# same for the offscreen mode. CI calls it; it needs a C compiler and
#   libx11-dev libxcursor-dev libxrandr-dev libxinerama-dev libxi-dev
#   libxxf86vm-dev libgl1-mesa-dev xvfb xauth mesa-vulkan-drivers libvulkan1
# and, for the check of the X server's own picture of the screen, imagemagick
# (without it that one check is skipped, with a notice).
#
# Pictures are left in $UMBRA_DEMO_OUT (default: a new temporary folder).
set -euo pipefail
cd "$(dirname "$0")/../.."
out=${UMBRA_DEMO_OUT:-$(mktemp -d)}
mkdir -p "$out"
tags=demo,x11
screen="-screen 0 1280x1024x24"

echo "== build ($tags)"
go build -tags "$tags" -o "$out/demo" ./cmd/demo

# The tests the demo tag adds (window_test.go), each named TestWindow…: the
# package's other tests build the same code with or without the tag, and
# the README's test command runs them (here they took 108 s on 2 cores
# beside the other CI jobs, the window tests a few).
echo "== window tests on Xvfb"
if grep -o '^func Test[A-Za-z0-9_]*' cmd/demo/window_test.go | grep -v '^func TestWindow'; then
  echo "window_test.go: the test above is not named TestWindow…, so this run would leave it out"
  exit 1
fi
UMBRA_REQUIRE_DISPLAY=1 UMBRA_REQUIRE_GPU=1 \
  xvfb-run -a -s "$screen" go test -count=1 -tags "$tags" -run '^TestWindow' -v ./cmd/demo

echo "== the window for 30 frames: its own read-back, and the X server's screen"
rm -f "$out/window.png" "$out/screen.png"
xvfb-run -a -s "$screen" bash -c '
  out=$0
  "$out/demo" --frames 30 --screenshot "$out/window.png" --hold 4s --backend vulkan &
  pid=$!
  # The screenshot appears after frame 30; the window stays up for --hold.
  for _ in $(seq 1 900); do
    [ -e "$out/window.png" ] && break
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  if [ -e "$out/window.png" ] && command -v import >/dev/null; then
    sleep 0.5
    import -window root "$out/screen.png"
  fi
  wait "$pid"' "$out"
pictures=("$out/window.png")
if [ -e "$out/screen.png" ]; then
  pictures+=("$out/screen.png")
else
  echo "notice: imagemagick's import is missing: the X server's screen was not captured"
fi
"$out/demo" --check "${pictures[@]}"

echo "== offscreen"
"$out/demo" --png "$out/offscreen.png" --frames 10 --backend vulkan
"$out/demo" --check "$out/offscreen.png"
echo "== ok: pictures in $out"
