#!/usr/bin/env bash
# The hardware-in-the-loop suite against its first target, the BlueZ simulator on a private bus (`make hil`; CI).
# The same suite runs against the qemu lab (Tests/Lab/run.sh, `make lab`) and real hardware (README): only the
# environment differs. Here the faults go through the simulator's control interface with busctl.
#
#   Tests/HIL/run-simulator.sh [TIME_SCALE]   (default 1: bluetoothd's real latencies, a 2-s Disconnect)
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
scale="${1:-1}"
cd "$root"

swift build --product bluez-sim >&2
bin="$(swift build --show-bin-path)"
out="$(mktemp)"
"$bin/bluez-sim" --private --devices 3 --time-scale "$scale" >"$out" 2>"$out.err" &
sim=$!
trap 'kill $sim 2>/dev/null; wait $sim 2>/dev/null; rm -f "$out" "$out.err"' EXIT
for _ in $(seq 1 300); do grep -q '^READY' "$out" && break; sleep 0.1; done
grep -q '^READY' "$out" || { echo "bluez-sim did not become ready:" >&2; cat "$out" "$out.err" >&2; exit 1; }
address="$(sed -n 's/^DBUS_SYSTEM_BUS_ADDRESS=//p' "$out")"

peripheral="C0:FF:EE:00:00:01"
control="busctl --address=$address call io.keepalive.Simulator /io/keepalive/Simulator io.keepalive.Simulator1"
export KEEPALIVE_HIL_BUS="$address"
export KEEPALIVE_HIL_ADAPTER=hci0
export KEEPALIVE_HIL_PERIPHERAL="$peripheral"
export KEEPALIVE_HIL_PERIPHERAL_OFF="$control InjectFault ssa{sv} $peripheral power-off 0"
export KEEPALIVE_HIL_PERIPHERAL_ON="$control ClearFault ss $peripheral power-off"
export KEEPALIVE_HIL_RESTART_BLUETOOTHD="$control Restart"
export KEEPALIVE_HIL_STOP_BLUETOOTHD="$control StopFor u"
export KEEPALIVE_HIL_ADAPTER_FAULTS=1
echo "== HIL suite against the simulator on $address" >&2
swift test --filter HILTests 2>&1 | grep -a -E "^hil:|Test |recorded an issue|error:|passed after|failed after"
