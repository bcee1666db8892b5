#!/usr/bin/env bash
# The daemon on the stock executors (libdispatch's): what a toolchain without Swift 6.3's executor SPI, or a later
# one whose SPI no longer matches, builds. The fence in Sources/QuietExecutor is forced shut with
# -DKEEPALIVE_STOCK_EXECUTORS (docs/EXECUTORS.md, "The fence"), in a scratch path of its own so that the usual
# build is left alone; then the built `keepalive --version` must say so, and the whole suite must pass on it (the
# end-to-end tests run the `keepalive` built beside the tests, so this one; QuietBetweenTicksTests skips its
# zero-wake-up test on it, since the stock executors wake every second by design).
#
#   .ci/stock-executors.sh                      (about as long as `make test` plus a full build)
#   .ci/stock-executors.sh --sanitize=address   the same under AddressSanitizer, in .build-asan: CI runs this one,
#                                               one stage for both checks (the memory tests, which measure the
#                                               process, are left to the plain run: ASan's allocator is not ours)
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="/opt/swift/usr/bin:$PATH"

scratch=.build-stock
sanitizer=()
if [[ "${1:-}" == --sanitize=address ]]; then
    scratch=.build-asan
    sanitizer=(--sanitize=address)
    export ASAN_OPTIONS=detect_leaks=0  # XCTest itself leaks
fi
flags=(--scratch-path "$scratch" -Xswiftc -DKEEPALIVE_STOCK_EXECUTORS "${sanitizer[@]}")
log="$scratch/test-log.txt"

echo "== stock executors: build with -DKEEPALIVE_STOCK_EXECUTORS ${sanitizer[*]} ($scratch)"
mkdir -p "$scratch"  # the logs go there too (ignored by git, as every .build-*)
status=0
timeout 2400 swift build --build-tests "${flags[@]}" > "$scratch/build-log.txt" 2>&1 || status=$?
if ((status != 0)); then
    ((status == 124)) && echo "stock-executors: the build did not finish within 2400 s" >&2
    grep -a -E "error:" "$scratch/build-log.txt" | head -30 || true  # (head closes the pipe early)
    tail -5 "$scratch/build-log.txt"
    exit 1
fi
# Zero warnings in the project's own code, as `make build` requires of the usual build.
if grep -a -E "^/.*/(Sources|Tests|Benchmarks|Examples)/.*(warning|error):" "$scratch/build-log.txt"; then
    echo "stock-executors: the build has warnings in the project's own code" >&2
    exit 1
fi

echo "== stock executors: keepalive --version says so"
binary="$(swift build "${flags[@]}" --show-bin-path)/keepalive"
version="$(timeout 60 "$binary" --version)"
echo "$version"
if ! grep -q -x "executors: stock (dispatch), reason: built with KEEPALIVE_STOCK_EXECUTORS" <<<"$version"; then
    echo "stock-executors: $binary --version does not say it runs on the stock executors" >&2
    exit 1
fi

echo "== stock executors: the whole suite"
status=0
if ((${#sanitizer[@]} == 0)); then
    # As `make test`: the memory tests alone first (they measure the process), then the rest, then the end-to-end
    # tests.
    {
        KEEPALIVE_MEMORY_TESTS=1 timeout 600 swift test --skip-build "${flags[@]}" \
            --filter tenThousandCallsDoNotGrowMemory \
            && KEEPALIVE_MEMORY_TESTS=1 timeout 600 swift test --skip-build "${flags[@]}" \
                --filter tenThousandDevicesWithFullLogs \
            && timeout 1800 swift test --skip-build "${flags[@]}" --skip KeepAliveCLITests \
            && timeout 1800 swift test --skip-build "${flags[@]}" --filter KeepAliveCLITests
    } > "$log" 2>&1 || status=$?
else
    # Under a sanitizer the end-to-end tests (KeepAliveCLITests: real daemons, simulators, brokers) run after the
    # rest, two at a time (the default on two cores): an instrumented daemon is several times slower, and the
    # suite's waits are scaled by the sanitizer's slowdown.
    {
        timeout 1800 swift test --skip-build "${flags[@]}" --skip KeepAliveCLITests \
            && timeout 1800 swift test --skip-build "${flags[@]}" --filter KeepAliveCLITests
    } > "$log" 2>&1 || status=$?
fi
if ((status != 0)); then
    ((status == 124)) && echo "stock-executors: a test run did not finish in time" >&2
    grep -a -E -A25 "recorded an issue|error:|ERROR: AddressSanitizer" "$log" | head -150 || true
    tail -5 "$log"
    exit 1
fi
grep -a -E "Quiet between ticks|noThreadWakesBetweenTicks" "$log" | grep -a -E "skipped" | head -3 || true
tail -3 "$log"
