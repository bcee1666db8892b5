#!/usr/bin/env bash
# The daemon on the stock executors (libdispatch's): what a toolchain without Swift 6.3's executor SPI, or a later
# one whose SPI no longer matches, builds. The fence in Sources/QuietExecutor is forced shut with
# -DKEEPALIVE_STOCK_EXECUTORS (docs/EXECUTORS.md, "The fence"), in a scratch path of its own so that the usual
# build is left alone; then the built `keepalive --version` must say so, and the whole suite must pass on it (the
# end-to-end tests run the `keepalive` built beside the tests, so this one; QuietBetweenTicksTests skips its
# zero-wake-up test on it, since the stock executors wake every second by design).
#
#   .ci/stock-executors.sh        (about as long as `make test` plus a full build)
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="/opt/swift/usr/bin:$PATH"

flags=(--scratch-path .build-stock -Xswiftc -DKEEPALIVE_STOCK_EXECUTORS)

echo "== stock executors: build with -DKEEPALIVE_STOCK_EXECUTORS (.build-stock)"
mkdir -p .build-stock  # the logs go there too (ignored by git, as every .build-*)
status=0
timeout 2400 swift build --build-tests "${flags[@]}" > .build-stock/build-log.txt 2>&1 || status=$?
if ((status != 0)); then
    ((status == 124)) && echo "stock-executors: the build did not finish within 2400 s" >&2
    grep -a -E "error:" .build-stock/build-log.txt | head -30 || true  # (head closes the pipe early)
    tail -5 .build-stock/build-log.txt
    exit 1
fi
# Zero warnings in the project's own code, as `make build` requires of the usual build.
if grep -a -E "^/.*/(Sources|Tests|Benchmarks|Examples)/.*(warning|error):" .build-stock/build-log.txt; then
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
# As `make test`: the memory test alone first (it measures the process), then everything.
status=0
{
    KEEPALIVE_MEMORY_TESTS=1 timeout 600 swift test --skip-build "${flags[@]}" \
        --filter tenThousandCallsDoNotGrowMemory \
        && timeout 1800 swift test --skip-build "${flags[@]}"
} > .build-stock/test-log.txt 2>&1 || status=$?
if ((status != 0)); then
    ((status == 124)) && echo "stock-executors: a test run did not finish in time" >&2
    grep -a -E -A25 "recorded an issue|error:" .build-stock/test-log.txt | head -150 || true
    tail -5 .build-stock/test-log.txt
    exit 1
fi
grep -a -E "Quiet between ticks|noThreadWakesBetweenTicks" .build-stock/test-log.txt | grep -a -E "skipped" | head -3 || true
tail -3 .build-stock/test-log.txt
