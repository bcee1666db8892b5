internal import CoreMetrics
internal import Basics

// The registry's series: what its `MetricsFactory` hands out as swift-metrics handlers, and what it renders. Each
// keeps its value under a lock of its own: an update from a poll never waits for a render.

/// A counter's value: only ever goes up, but for ``set(_:)`` by a collector that mirrors a total kept elsewhere.
final class CounterSeries: CounterHandler, Sendable {
    private let count = Locked<Int64>(0)

    func increment(by amount: Int64) {
        count.withLock { $0 &+= max(amount, 0) }
    }

    func reset() {
        count.withLock { $0 = 0 }
    }

    func set(_ total: Int64) {
        count.withLock { $0 = total }
    }

    var value: Int64 { count.withLock { $0 } }
}

/// A gauge's last value.
final class GaugeSeries: RecorderHandler, MeterHandler, Sendable {
    private let current = Locked<Double>(0)

    func record(_ value: Int64) { set(Double(value)) }
    func record(_ value: Double) { set(value) }
    func set(_ value: Int64) { set(Double(value)) }
    func set(_ value: Double) { current.withLock { $0 = value } }
    func increment(by amount: Double) { current.withLock { $0 += amount } }
    func decrement(by amount: Double) { current.withLock { $0 -= amount } }

    var value: Double { current.withLock { $0 } }
}

/// A histogram with fixed buckets: counts per bucket (not cumulative: rendering adds them up), the sum, the count.
final class HistogramSeries: RecorderHandler, TimerHandler, Sendable {
    struct Counts: Sendable {
        /// One per bound, and the last for what exceeds every bound.
        var buckets: [Int64]
        var sum: Double = 0
        var count: Int64 = 0
    }

    let bounds: [Double]
    /// What a recorded value is divided by: 1e9 for a timer's nanoseconds (a division, so that a value a
    /// binary fraction of a second is exact).
    private let divisor: Double
    private let counts: Locked<Counts>

    init(buckets: [Double], divisor: Double) {
        bounds = buckets
        self.divisor = divisor
        counts = Locked(Counts(buckets: Array(repeating: 0, count: buckets.count + 1)))
    }

    func record(_ value: Int64) { observe(Double(value) / divisor) }
    func record(_ value: Double) { observe(value / divisor) }
    func recordNanoseconds(_ duration: Int64) { observe(Double(duration) / divisor) }

    private func observe(_ value: Double) {
        guard !value.isNaN else { return }
        let index = bounds.firstIndex { value <= $0 } ?? bounds.count
        counts.withLock { counts in
            counts.buckets[index] += 1
            counts.sum += value
            counts.count += 1
        }
    }

    var value: Counts { counts.withLock { $0 } }
}
