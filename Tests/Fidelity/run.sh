#!/usr/bin/env bash
# Fidelity check run by CI: bleak 3.x and Debian's bluetoothctl 5.66 against bluez-sim.
#
#   Tests/Fidelity/run.sh [path/to/bluez-sim]
#
# Without an argument it builds bluez-sim with `swift build --scratch-path "${SCRATCH_PATH:-.build-sim}"`
# (`-c ${BUILD_CONFIGURATION:-debug}`). The venv lives in ${FIDELITY_VENV:-~/.cache/keepalive-venv}.
# The last line of output is `N passed, M failed`; the exit status is non-zero on any failure.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
venv="${FIDELITY_VENV:-$HOME/.cache/keepalive-venv}"

if [[ $# -ge 1 ]]; then
    binary="$1"
else
    scratch="${SCRATCH_PATH:-$root/.build-sim}"
    configuration="${BUILD_CONFIGURATION:-debug}"
    swift build --package-path "$root" --scratch-path "$scratch" -c "$configuration" --product bluez-sim >&2
    binary="$(swift build --package-path "$root" --scratch-path "$scratch" -c "$configuration" --show-bin-path)/bluez-sim"
fi
[[ -x "$binary" ]] || { echo "bluez-sim not found at $binary" >&2; exit 2; }

if ! command -v bluetoothctl >/dev/null; then
    echo "installing bluez (for bluetoothctl)" >&2
    if [[ $(id -u) -eq 0 ]]; then apt-get install -y -q bluez >&2; else sudo apt-get install -y -q bluez >&2; fi
fi
command -v dbus-daemon >/dev/null || { echo "dbus-daemon is missing" >&2; exit 2; }

if [[ ! -x "$venv/bin/python" ]]; then
    python3 -m venv "$venv" >&2
fi
"$venv/bin/pip" install -q 'bleak>=3,<4' pexpect >&2

exec "$venv/bin/python" "$root/Tests/Fidelity/fidelity.py" "$binary"
