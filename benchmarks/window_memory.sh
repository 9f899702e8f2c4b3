#!/bin/bash
# Resident memory of the window with the starter model: 25 s after start (the chat model
# loads once the window is usable, unless models.load_at_start is off), while answering,
# and idle after the answer.  Drives the real window under Xvfb with
# xdotool (Debian: xvfb xdotool).  The profile must hold the prepared models
# (copy data/models from a profile that ran `setup`).
#
#   benchmarks/window_memory.sh PROFILE_DIR
set -euo pipefail
PROFILE=${1:?usage: benchmarks/window_memory.sh PROFILE_DIR}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
export DISPLAY=:${WINDOW_MEMORY_DISPLAY:-79}
Xvfb "$DISPLAY" -screen 0 1400x900x24 >/dev/null 2>&1 &
XPID=$!
trap 'kill $XPID 2>/dev/null || true' EXIT
sleep 2
"$ROOT/.venv/bin/agenvoy-desktop" --data-dir "$PROFILE" >/dev/null 2>&1 &
APID=$!
sleep 25
rss() { awk '/VmRSS|VmHWM/ {printf "%s %.0f MiB  ", $1, $2/1024}' "/proc/$APID/status"; echo; }
echo "start, 25 s after (the model loads once the window is usable): $(rss)"
xdotool key ctrl+n; sleep 2
xdotool mousemove 550 788 click 1; sleep 0.5   # the message box at 1400x900
xdotool type --delay 10 "Write a short story about a bicycle in Graz."; xdotool key Return
for i in 1 2 3 4 5 6 7 8; do sleep 8; echo "answering, t+$((i * 8)) s: $(rss)"; done
sleep 30
echo "idle after the answer: $(rss)"
kill $APID
