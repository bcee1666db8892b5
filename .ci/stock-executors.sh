#!/usr/bin/env bash
# The daemon on the stock executors (libdispatch's), in two halves (docs/EXECUTORS.md, "The fence"):
#
# 1. The fence, shut at compile time: what a toolchain without Swift 6.3's executor SPI, or a later one whose SPI
#    no longer matches, builds. Sources/QuietExecutor (and Basics, under it) is built with
#    -DKEEPALIVE_STOCK_EXECUTORS in .build-stock, without a warning, and a program linked against that build must
#    say `executors: stock (dispatch), reason: built with KEEPALIVE_STOCK_EXECUTORS` after `install()`, which
#    installs nothing, and have no pool statistics (what StatusTests checks in such a build). Only that
#    module has the fence (every other module is the same code either way), so nothing else is rebuilt.
# 2. The daemon on the stock executors at run time: `KEEPALIVE_EXECUTOR=dispatch` makes `install()` keep them, in
#    the usual build (.build, which `make test` built). The built `keepalive --version` must say so, then the
#    end-to-end tests run with it in their environment, which every daemon, simulator and tool they start
#    inherits. (The other tests run on the stock executors anyway: nothing installs the quiet ones in the test
#    process.) QuietBetweenTicksTests skips its zero-wake-up test, since the stock executors wake every second by
#    design.
#
# Until stop 31 this stage rebuilt everything, tests too, with the flag, and ran the whole suite on it: 715 s of
# CI's budget, most of it a second build of code that the flag does not change.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="/opt/swift/usr/bin:$PATH"

scratch=.build-stock
mkdir -p "$scratch"  # the logs go there too (ignored by git, as every .build-*)

echo "== stock executors: Sources/QuietExecutor built with -DKEEPALIVE_STOCK_EXECUTORS ($scratch)"
status=0
timeout 600 swift build --scratch-path "$scratch" -Xswiftc -DKEEPALIVE_STOCK_EXECUTORS --target QuietExecutor \
    > "$scratch/build-log.txt" 2>&1 || status=$?
if ((status != 0)); then
    grep -a -E "error:" "$scratch/build-log.txt" | head -30 || true  # (head closes the pipe early)
    tail -5 "$scratch/build-log.txt"
    exit 1
fi
if grep -a -E "^/.*/(Sources|Tests)/.*(warning|error):" "$scratch/build-log.txt"; then
    echo "stock-executors: the fence-shut build has warnings in the project's own code" >&2
    exit 1
fi

echo "== stock executors: a program linked against it says so"
debug="$scratch/debug"
program="$scratch/fence-check"
cat > "$scratch/fence-check.swift" <<'EOF'
import QuietExecutor

let installed = QuietExecutors.install()
print("installed: \(installed)")
print("executors: \(QuietExecutors.status)")
print("statistics: \(QuietExecutors.statistics == nil ? "none" : "some")")
EOF
timeout 300 swiftc "$scratch/fence-check.swift" -I "$debug/Modules" \
    -Xcc -fmodule-map-file="$PWD/Sources/CLinux/module.modulemap" \
    "$debug"/QuietExecutor.build/*.o "$debug"/Basics.build/*.o -o "$program"
said="$(env -u KEEPALIVE_EXECUTOR timeout 60 "$program")"
echo "$said"
expected=$'installed: false\nexecutors: stock (dispatch), reason: built with KEEPALIVE_STOCK_EXECUTORS\nstatistics: none'
if [[ "$said" != "$expected" ]]; then
    echo "stock-executors: with the fence shut, install() must install nothing, say why, and count nothing" >&2
    exit 1
fi

echo "== stock executors: KEEPALIVE_EXECUTOR=dispatch, and keepalive --version says so"
export KEEPALIVE_EXECUTOR=dispatch
binary="$(swift build --show-bin-path)/keepalive"
version="$(timeout 60 "$binary" --version)"
echo "$version"
if ! grep -q -x "executors: stock (dispatch), reason: KEEPALIVE_EXECUTOR=dispatch" <<<"$version"; then
    echo "stock-executors: $binary --version does not say it runs on the stock executors" >&2
    exit 1
fi

echo "== stock executors: the end-to-end tests, every daemon on the stock executors"
log="$scratch/test-log.txt"
status=0
timeout 1200 swift test --skip-build --filter KeepAliveCLITests > "$log" 2>&1 || status=$?
if ((status != 0)); then
    ((status == 124)) && echo "stock-executors: the end-to-end tests did not finish in time" >&2
    grep -a -E -A25 "recorded an issue|error:" "$log" | head -150 || true
    tail -5 "$log"
    exit 1
fi
grep -a -E "Quiet between ticks|noThreadWakesBetweenTicks" "$log" | grep -a -E "skipped" | head -3 || true
tail -3 "$log"
