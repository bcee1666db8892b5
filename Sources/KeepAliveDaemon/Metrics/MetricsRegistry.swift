public import CoreMetrics
internal import Basics

/// The daemon's metrics: a swift-metrics `MetricsFactory` that keeps every counter, gauge and histogram it hands
/// out, and renders them as Prometheus text 0.0.4 or OpenMetrics 1.0 (``render(_:)``).
///
/// The poll engine, the MQTT bridge and the fleet report through it as through any factory; what only the daemon
/// knows (the spool, the adapters' health, the build) is read by *collectors* at render time, so nothing runs
/// between renders. Counters map to counters, `Gauge`, non-aggregating `Recorder` and `Meter` to gauges, `Timer`
/// (nanoseconds, rendered in seconds) and aggregating `Recorder` to histograms with the fixed buckets of
/// ``MetricFamily/table``. Never bootstrapped into `MetricsSystem`: each daemon has its own (tests run several in
/// one process).
public final class MetricsRegistry: MetricsFactory, Sendable {
    /// Series by family name, then by their sorted labels.
    private struct Family {
        var family: MetricFamily
        var series: [Labels: Series] = [:]
    }

    struct Labels: Hashable, Sendable {
        /// Sorted by name: one series per set of labels, whatever order they were given in.
        let pairs: [Pair]

        init(_ dimensions: [(String, String)]) {
            pairs = dimensions.map { Pair(name: $0.0, value: $0.1) }.sorted { $0.name < $1.name }
        }
    }

    struct Pair: Hashable, Sendable, Comparable {
        let name: String
        let value: String

        static func < (lhs: Pair, rhs: Pair) -> Bool {
            (lhs.name, lhs.value) < (rhs.name, rhs.value)
        }
    }

    enum Series: Sendable {
        case counter(CounterSeries)
        case gauge(GaugeSeries)
        case histogram(HistogramSeries)
    }

    /// A family as rendered: its header in each format, and its series in order, each with the text its sample
    /// lines start with (names and escaped labels are made once, not at every render).
    struct RenderedFamily: Sendable {
        let prometheusHeader: String
        let openMetricsHeader: String
        let series: [(series: Series, prefixes: [String])]
    }

    private struct State {
        var families: [String: Family] = [:]
        /// What a render walks; nil after a series was made or destroyed.
        var layout: [RenderedFamily]?
    }

    private let state = Locked(State())
    private let collectors = Locked<[@Sendable () -> Void]>([])

    public init() {}

    /// `collect` runs before every render, outside the registry's lock: it sets the gauges and counters of what is
    /// read rather than reported (``gauge(_:_:)``, ``counter(_:_:)``).
    public func addCollector(_ collect: @escaping @Sendable () -> Void) {
        collectors.withLock { $0.append(collect) }
    }

    /// The gauge of family `name` with `labels`, for a collector.
    func gauge(_ name: String, _ labels: [(String, String)] = []) -> GaugeSeries {
        guard case .gauge(let series) = series(name, kind: .gauge, labels, make: { .gauge(GaugeSeries()) }) else {
            return GaugeSeries()
        }
        return series
    }

    /// The counter of family `name` (without `_total`) with `labels`, for a collector that reads a total kept
    /// elsewhere (``CounterSeries/set(_:)``).
    func counter(_ name: String, _ labels: [(String, String)] = []) -> CounterSeries {
        guard case .counter(let series) = series(name, kind: .counter, labels, make: { .counter(CounterSeries()) })
        else { return CounterSeries() }
        return series
    }

    /// The series of `label` with `labels`, made on first use. A label whose family has another kind (a library
    /// reusing one of the daemon's names) gets a family of its own, named after the kind.
    private func series(
        _ label: String, kind: MetricFamily.Kind, _ dimensions: [(String, String)], make: () -> Series
    ) -> Series {
        var name = label
        if kind == .counter, name.hasSuffix("_total") { name.removeLast("_total".count) }
        let labels = Labels(dimensions)
        return state.withLock { state in
            var family =
                state.families[name]
                ?? Family(family: MetricFamily.table[name] ?? MetricFamily.unlisted(label, kind: kind))
            if family.family.kind != kind {
                let other = MetricFamily.unlisted(label + "_" + kind.rawValue, kind: kind)
                name = other.name
                family = state.families[name] ?? Family(family: other)
            }
            if let existing = family.series[labels] { return existing }
            let made = make()
            family.series[labels] = made
            state.families[name] = family
            state.layout = nil
            return made
        }
    }

    private func remove(_ handler: AnyObject) {
        state.withLock { state in
            state.layout = nil
            for (name, family) in state.families {
                guard
                    let key = family.series.first(where: { _, series in
                        switch series {
                        case .counter(let object): object === handler
                        case .gauge(let object): object === handler
                        case .histogram(let object): object === handler
                        }
                    })?.key
                else { continue }
                state.families[name]?.series[key] = nil
                if state.families[name]?.series.isEmpty == true { state.families[name] = nil }
                return
            }
        }
    }

    /// Every family with at least one series, in the table's order (then the unlisted by name), each with its
    /// series sorted by labels, after the collectors ran. The layout is made again only after a change.
    func snapshot() -> [RenderedFamily] {
        for collect in collectors.withLock({ $0 }) { collect() }
        return state.withLock { state in
            if let layout = state.layout { return layout }
            let order = Dictionary(uniqueKeysWithValues: MetricFamily.all.enumerated().map { ($1.name, $0) })
            let layout = state.families.values
                .sorted {
                    (order[$0.family.name] ?? .max, $0.family.name) < (order[$1.family.name] ?? .max, $1.family.name)
                }
                .map { family in
                    let series = family.series.sorted { $0.key.pairs.lexicographicallyPrecedes($1.key.pairs) }
                    return RenderedFamily(
                        prometheusHeader: Self.header(family.family, .prometheus),
                        openMetricsHeader: Self.header(family.family, .openMetrics),
                        series: series.map { ($0.value, Self.prefixes(family.family, $0.key, $0.value)) })
                }
            state.layout = layout
            return layout
        }
    }

    // MARK: MetricsFactory

    public func makeCounter(label: String, dimensions: [(String, String)]) -> any CounterHandler {
        guard case .counter(let series) = series(label, kind: .counter, dimensions, make: { .counter(CounterSeries()) })
        else { return CounterSeries() }
        return series
    }

    public func makeRecorder(label: String, dimensions: [(String, String)], aggregate: Bool) -> any RecorderHandler {
        if aggregate {
            return histogram(label, dimensions, divisor: 1)
        }
        guard case .gauge(let series) = series(label, kind: .gauge, dimensions, make: { .gauge(GaugeSeries()) }) else {
            return GaugeSeries()
        }
        return series
    }

    public func makeMeter(label: String, dimensions: [(String, String)]) -> any MeterHandler {
        guard case .gauge(let series) = series(label, kind: .gauge, dimensions, make: { .gauge(GaugeSeries()) }) else {
            return GaugeSeries()
        }
        return series
    }

    public func makeTimer(label: String, dimensions: [(String, String)]) -> any TimerHandler {
        // swift-metrics times in nanoseconds; the families are in seconds.
        histogram(label, dimensions, divisor: 1e9)
    }

    private func histogram(_ label: String, _ dimensions: [(String, String)], divisor: Double) -> HistogramSeries {
        let buckets = {
            MetricFamily.table[label]?.buckets
                ?? MetricFamily.unlisted(label, kind: .histogram).buckets
        }
        guard
            case .histogram(let series) = series(
                label, kind: .histogram, dimensions,
                make: { .histogram(HistogramSeries(buckets: buckets(), divisor: divisor)) })
        else { return HistogramSeries(buckets: buckets(), divisor: divisor) }
        return series
    }

    public func destroyCounter(_ handler: any CounterHandler) { remove(handler) }
    public func destroyRecorder(_ handler: any RecorderHandler) { remove(handler) }
    public func destroyMeter(_ handler: any MeterHandler) { remove(handler) }
    public func destroyTimer(_ handler: any TimerHandler) { remove(handler) }
}
