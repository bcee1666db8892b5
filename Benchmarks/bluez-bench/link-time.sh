#!/usr/bin/env bash
# Link time per poll (issue #35): keepalive's BlueZTransport and bleak doing the same reads, one poll at a time,
# timed by a neutral observer on the bus (link_time.py explains the figures).
#
#   Benchmarks/bluez-bench/link-time.sh [--scale X] [POLLS]      against bluez-sim (default scale 0.01, as run.sh)
#   Tests/Lab/run.sh -- Benchmarks/bluez-bench/link-time.sh --lab [POLLS]
#                                                                against the qemu lab's real bluetoothd 5.66
#
# Builds bluez-sim and BlueZBenchmark in release (scratch ${SCRATCH_PATH:-.build-bench}; build before starting the
# lab, whose guest takes both cores); bleak and dbus-fast live in ${BENCH_VENV:-~/.cache/keepalive-venv}.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
scratch="${SCRATCH_PATH:-$root/.build-bench}"
venv="${BENCH_VENV:-$HOME/.cache/keepalive-venv}"
lab=0
scale=0.01
while [[ $# -gt 0 ]]; do
    case "$1" in
        --lab) lab=1; shift ;;
        --scale) scale="$2"; shift 2 ;;
        *) break ;;
    esac
done
polls="${1:-20}"

swift build --package-path "$root" --scratch-path "$scratch" -c release --product BlueZBenchmark >&2
bin="$(swift build --package-path "$root" --scratch-path "$scratch" -c release --show-bin-path)"
[[ -x "$venv/bin/python" ]] || python3 -m venv "$venv" >&2
"$venv/bin/python" -c 'import bleak, dbus_fast' 2>/dev/null || "$venv/bin/pip" install -q 'bleak>=3,<4' >&2

if ((lab)); then
    # The lab's environment (Tests/Lab/README.md): libdbus speaks ANONYMOUS over the guest's TCP listener, bleak
    # (dbus-fast) only EXTERNAL, through the socat bridge. The observer listens on keepalive's path (ANONYMOUS,
    # signals only): a monitor needs EXTERNAL as root, and through the bridge its timestamps lagged keepalive's by
    # 2–5 ms, and varied. Polls start 4.37 s apart (one device, a link of about 2 s): back to back, bluetoothd
    # 5.66 lost Connects sent while the last link's ATT channel was still being torn down, after Connected=false
    # (its attio_cleanup shuts the new attempt's channel down). Not a whole number of seconds: bluetoothd's 2-s
    # disconnect timer is rounded to a whole-second boundary (g_timeout_add_seconds), so its length depends on
    # when in the second Disconnect comes, and polls a whole number of seconds apart would all see one length.
    : "${KEEPALIVE_HIL_PERIPHERAL:?run this inside Tests/Lab/run.sh -- …}"
    exec "$venv/bin/python" "$root/Benchmarks/bluez-bench/link_time.py" \
        --swift "$bin/BlueZBenchmark" --python "$venv/bin/python" --polls "$polls" \
        --address "$KEEPALIVE_HIL_PERIPHERAL" --every 4.37 \
        --bus "$DBUS_SYSTEM_BUS_ADDRESS" --external-bus "$KEEPALIVE_LAB_BUS_EXTERNAL" --observer-on-bus \
        --label "qemu lab, bluetoothd 5.66" ${LINK_CSV:+--csv "$LINK_CSV"}
fi

swift build --package-path "$root" --scratch-path "$scratch" -c release --product bluez-sim >&2
out="$(mktemp)"
"$bin/bluez-sim" --private --devices 10 --time-scale "$scale" >"$out" &
sim=$!
trap 'kill $sim 2>/dev/null; wait $sim 2>/dev/null; rm -f "$out"' EXIT
for _ in $(seq 1 300); do grep -q '^READY' "$out" && break; sleep 0.1; done
grep -q '^READY' "$out" || { echo "bluez-sim did not become ready" >&2; cat "$out" >&2; exit 1; }
export "$(grep '^DBUS_SYSTEM_BUS_ADDRESS=' "$out")"
addresses=()
for n in $(seq 1 10); do addresses+=(--address "$(printf 'C0:FF:EE:00:00:%02X' "$n")"); done
"$venv/bin/python" "$root/Benchmarks/bluez-bench/link_time.py" \
    --swift "$bin/BlueZBenchmark" --python "$venv/bin/python" --polls "$polls" "${addresses[@]}" \
    --label "bluez-sim, time scale $scale" ${LINK_CSV:+--csv "$LINK_CSV"}
