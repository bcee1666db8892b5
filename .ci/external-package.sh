#!/usr/bin/env bash
# A package outside this repository, as an app developer would make it: it depends on this one by path,
# imports KeepAlive, Polling, BlueZ and DBus, and runs Examples/BatteryMonitor's code against the BlueZ simulator for
# three ticks. Fails unless it builds with zero warnings in its own code and prints three readings.
#
# EXTERNAL_PACKAGE_SCRATCH: a scratch path to build in (default: the package's own). CI passes the one where
# .ci/check-doc-samples.sh, another outside package depending on this one by path, built the library's modules: the
# same commands, which llbuild then finds done (only the app is compiled: 20 s against 85 here).
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
work="$(mktemp -d /tmp/keepalive-external.XXXXXX)"
scratch=(${EXTERNAL_PACKAGE_SCRATCH:+--scratch-path "$EXTERNAL_PACKAGE_SCRATCH"})
sim_pid=""
cleanup() {
  if [ -n "$sim_pid" ]; then kill "$sim_pid" 2>/dev/null || true; fi
  rm -rf "$work"
}
trap cleanup EXIT

mkdir -p "$work/app/Sources/BatteryApp"
cat > "$work/app/Package.swift" <<SWIFT
// swift-tools-version:6.0
import PackageDescription

let package = Package(
    name: "BatteryApp",
    platforms: [.macOS(.v15)],
    dependencies: [.package(name: "keepalive", path: "$repo")],
    targets: [
        .executableTarget(
            name: "BatteryApp",
            dependencies: [
                .product(name: "KeepAlive", package: "keepalive"),
                .product(name: "Polling", package: "keepalive"),
                .product(name: "BlueZ", package: "keepalive"),
                .product(name: "DBus", package: "keepalive"),
            ]
        )
    ]
)
SWIFT
cp "$repo/Examples/BatteryMonitor/main.swift" "$work/app/Sources/BatteryApp/main.swift"

echo "building $work/app (depends on $repo by path)"
( cd "$work/app" && swift build "${scratch[@]}" 2>&1 ) > "$work/build.log" || { tail -30 "$work/build.log"; exit 1; }
if grep -E "^$work/app/Sources/.*(warning|error):" "$work/build.log"; then echo "the app's own code has warnings"; exit 1; fi

# The simulator from this repository's build, on a private bus of its own.
keepalive="$(cd "$repo" && swift build --show-bin-path)/keepalive"
[ -x "$keepalive" ] || (cd "$repo" && swift build --product keepalive >/dev/null)
"$keepalive" simulate --private > "$work/sim.out" 2> "$work/sim.err" &
sim_pid=$!
for _ in $(seq 100); do grep -q READY "$work/sim.out" 2>/dev/null && break; sleep 0.1; done
grep -q READY "$work/sim.out" || { echo "the simulator did not start"; cat "$work/sim.err"; exit 1; }
address="$(sed -n 's/^DBUS_SYSTEM_BUS_ADDRESS=//p' "$work/sim.out")"

( cd "$work/app" && timeout 60 swift run "${scratch[@]}" --skip-build BatteryApp --bus "$address" --address C0:FF:EE:00:00:01 --ticks 3 --interval 3 ) \
  > "$work/run.out" 2> "$work/run.err" || { cat "$work/run.out" "$work/run.err"; exit 1; }
cat "$work/run.out"
lines="$(grep -c -E "^tick [0-2]: battery [0-9]+ %" "$work/run.out" || true)"
if [ "$lines" != 3 ]; then echo "expected three battery readings, got $lines"; cat "$work/run.err"; exit 1; fi
echo "external package: 3 ticks, 3 readings"
