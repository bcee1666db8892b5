#!/usr/bin/env bash
# BlueZTransport vs bleak, in one run, against one simulator process (issue #4's benchmark):
# connect → read one characteristic → disconnect, N = 1, 10, 100 devices, three at a time.
#
#   Benchmarks/bluez-bench/run.sh [ROUNDS]
#
# Builds bluez-sim and BlueZBenchmark in release (scratch ${SCRATCH_PATH:-.build-bench}); bleak lives in
# ${BENCH_VENV:-~/.cache/keepalive-venv} (the fidelity check's venv). Client CPU is each client's own
# getrusage; the simulator and dbus-daemon are separate processes and not counted.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
rounds="${1:-3}"
scratch="${SCRATCH_PATH:-$root/.build-bench}"
venv="${BENCH_VENV:-$HOME/.cache/keepalive-venv}"

swift build --package-path "$root" --scratch-path "$scratch" -c release --product bluez-sim >&2
swift build --package-path "$root" --scratch-path "$scratch" -c release --product BlueZBenchmark >&2
bin="$(swift build --package-path "$root" --scratch-path "$scratch" -c release --show-bin-path)"
[[ -x "$venv/bin/python" ]] || python3 -m venv "$venv" >&2
"$venv/bin/pip" install -q 'bleak>=3,<4' >&2

out="$(mktemp)"
"$bin/bluez-sim" --private --devices 100 --time-scale 0.01 >"$out" &
sim=$!
trap 'kill $sim 2>/dev/null; wait $sim 2>/dev/null; rm -f "$out"' EXIT
for _ in $(seq 1 300); do grep -q '^READY' "$out" && break; sleep 0.1; done
grep -q '^READY' "$out" || { echo "bluez-sim did not become ready" >&2; cat "$out" >&2; exit 1; }
export "$(grep '^DBUS_SYSTEM_BUS_ADDRESS=' "$out")"

field() { sed -n "s/.*$1=\([0-9]*\).*/\1/p"; }
printf '%-6s %22s %22s %12s %22s %22s\n' "N" "keepalive CPU/device" "bleak CPU/device" "ratio" "keepalive wall/round" "bleak wall/round"
for n in 1 10 100; do
    swift_line="$("$bin/BlueZBenchmark" "$n" "$rounds")"
    bleak_line="$("$venv/bin/python" "$root/Benchmarks/bluez-bench/bleak_bench.py" "$n" "$rounds")"
    s_cpu=$(echo "$swift_line" | field cpu_us_per_device); b_cpu=$(echo "$bleak_line" | field cpu_us_per_device)
    s_wall=$(echo "$swift_line" | field wall_ms_per_round); b_wall=$(echo "$bleak_line" | field wall_ms_per_round)
    s_fail=$(echo "$swift_line" | field failures); b_fail=$(echo "$bleak_line" | field failures)
    ratio=$(awk -v a="$s_cpu" -v b="$b_cpu" 'BEGIN { printf "%.3f×", (b > 0 ? a / b : 0) }')
    printf '%-6s %19s µs %19s µs %12s %19s ms %19s ms\n' "$n" "$s_cpu" "$b_cpu" "$ratio" "$s_wall" "$b_wall"
    [[ "$s_fail" == 0 && "$b_fail" == 0 ]] || echo "  failures: keepalive $s_fail, bleak $b_fail" >&2
done
