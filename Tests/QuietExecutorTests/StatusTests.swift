import QuietExecutor
import Testing

/// The status API, which every build has: with the SPI or without it (`.ci/stock-executors.sh`).
@Suite struct StatusTests {
    /// Catches: a test process (which runs on the stock executors: nothing installs these in it) that says it
    /// runs on the quiet ones, and a stock build that does not say why.
    @Test func aProcessThatDidNotInstallThemSaysStockAndWhy() {
        #expect(!QuietExecutors.isInstalled)
        guard case .stock(let reason) = QuietExecutors.status else {
            Issue.record("status is \(QuietExecutors.status)")
            return
        }
        #if KEEPALIVE_STOCK_EXECUTORS
            #expect(reason == "built with KEEPALIVE_STOCK_EXECUTORS")
            #expect(QuietExecutors.unavailableReason == reason)
            #expect(!QuietExecutors.install())
        #else
            #expect(QuietExecutors.unavailableReason == nil)
            #expect(reason.contains("install()"), "\(reason)")
        #endif
        #expect(QuietExecutors.statistics == nil)
    }

    /// Catches: a description `keepalive --version` would print differently from what the stock-executor CI job
    /// and QuietBetweenTicksTests look for.
    @Test func descriptions() {
        #expect(QuietExecutors.Status.quiet.description == "quiet")
        #expect(QuietExecutors.Status.stock(reason: "why").description == "stock (dispatch), reason: why")
    }
}
