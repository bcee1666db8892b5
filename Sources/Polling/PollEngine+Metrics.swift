import CoreMetrics
import KeepAlive
import Basics

/// What the engine reports through swift-metrics (``PollEngine/Configuration/metricsFactory``), by label:
///
/// | label | kind | dimensions |
/// |---|---|---|
/// | `keepalive_polls_total` | Counter | `device`, `result`, and `code` for a failed one |
/// | `keepalive_advertisements_heard_total` | Counter | `device` |
/// | `keepalive_failures_in_a_row` | Gauge | `device` |
/// | `keepalive_window_used_seconds` | Timer | `adapter` |
/// | `keepalive_slot_wait_seconds` | Timer | `adapter` |
/// | `keepalive_link_seconds` | Timer | `adapter` |
/// | `keepalive_poll_phase_seconds` | Timer | `adapter`, `phase` (``PollMetrics/Phase``) |
///
/// Records are counted where they are published, the one place every record passes, so the counters agree with
/// the records of the same run. The handles are made once per device and adapter and kept: a poll costs a few
/// handler calls, never a metric's creation. With `NOOPMetricsHandler` nothing is timed at all.
final class PollMetrics: Sendable {
    /// The parts of a poll timed separately.
    enum Phase: String, CaseIterable, Sendable {
        /// `connect` up to the link (the transport's whole connect, less service resolution when it says).
        case connect
        /// From the link up to the wanted characteristics (``PeripheralTransport/serviceResolutionTime(of:)``).
        case serviceResolution = "service_resolution"
        case write
        case read
        /// Subscribing to a notifying characteristic (not the listening, whose length is configured).
        case subscribe
        case disconnect
    }

    /// A device's handles: its counters and its failures in a row.
    private final class Device: Sendable {
        let newData: Counter
        let noData: Counter
        let heard: Counter
        let failuresInARow: Gauge
        /// Failed polls by code, made at a code's first failure; and the failures since the last success.
        let failed = Locked<(byCode: [String: Counter], inARow: Int)>(([:], 0))

        init(name: String, factory: any MetricsFactory) {
            newData = Counter(
                label: "keepalive_polls_total", dimensions: [("device", name), ("result", "newData")], factory: factory)
            noData = Counter(
                label: "keepalive_polls_total", dimensions: [("device", name), ("result", "noData")], factory: factory)
            heard = Counter(
                label: "keepalive_advertisements_heard_total", dimensions: [("device", name)], factory: factory)
            failuresInARow = Gauge(
                label: "keepalive_failures_in_a_row", dimensions: [("device", name)], factory: factory)
            failuresInARow.record(0)
        }
    }

    /// An adapter's histograms.
    private final class Adapter: Sendable {
        let windowUsed: Timer
        let slotWait: Timer
        let link: Timer
        let phases: [Phase: Timer]

        init(name: String, factory: any MetricsFactory) {
            let dimensions = [("adapter", name)]
            windowUsed = Timer(label: "keepalive_window_used_seconds", dimensions: dimensions, factory: factory)
            slotWait = Timer(label: "keepalive_slot_wait_seconds", dimensions: dimensions, factory: factory)
            link = Timer(label: "keepalive_link_seconds", dimensions: dimensions, factory: factory)
            var phases: [Phase: Timer] = [:]
            for phase in Phase.allCases {
                phases[phase] = Timer(
                    label: "keepalive_poll_phase_seconds", dimensions: dimensions + [("phase", phase.rawValue)],
                    factory: factory)
            }
            self.phases = phases
        }
    }

    /// False with `NOOPMetricsHandler`: no clock is read for a phase, no handle is looked up.
    let enabled: Bool
    private let factory: any MetricsFactory
    private let devices: [String: Device]
    /// By adapter name, made at an adapter's first record (a fleet's holder may poll on an adapter of its own).
    private let adapters: Locked<[String: Adapter]>

    init(factory: any MetricsFactory, peripherals: [PeripheralSpec]) {
        self.factory = factory
        enabled = !(factory is NOOPMetricsHandler)
        guard enabled else {
            devices = [:]
            adapters = Locked([:])
            return
        }
        var devices: [String: Device] = [:]
        var adapters: [String: Adapter] = [:]
        for spec in peripherals {
            devices[spec.name] = Device(name: spec.name, factory: factory)
            let adapter = spec.peripheral.adapter
            if adapters[adapter] == nil { adapters[adapter] = Adapter(name: adapter, factory: factory) }
        }
        self.devices = devices
        self.adapters = Locked(adapters)
    }

    private func adapter(_ name: String) -> Adapter {
        adapters.withLock { adapters in
            if let known = adapters[name] { return known }
            let made = Adapter(name: name, factory: factory)
            adapters[name] = made
            return made
        }
    }

    /// One published record: its result, its window, its wait, its link, what was heard.
    func observe(_ record: PollRecord) {
        guard enabled, let device = devices[record.device] else { return }
        switch record.result {
        case .newData: device.newData.increment()
        case .noData: device.noData.increment()
        case .failed: break
        }
        // Contention and a gated poll's silence say nothing of the device: they leave its failures in a row as they
        // are (as its MQTT availability does).
        let saysNothing = record.isContention || (record.isNotHeard && record.source == .connection)
        let inARow: Int = device.failed.withLock { failed in
            guard record.result == .failed else {
                failed.inARow = 0
                return 0
            }
            let code = record.failure?.code ?? "unknown"
            let counter: Counter
            if let known = failed.byCode[code] {
                counter = known
            } else {
                counter = Counter(
                    label: "keepalive_polls_total",
                    dimensions: [("device", record.device), ("result", "failed"), ("code", code)], factory: factory)
                failed.byCode[code] = counter
            }
            counter.increment()
            if !saysNothing { failed.inARow += 1 }
            return failed.inARow
        }
        device.failuresInARow.record(inARow)
        if let heard = record.heard, heard.count > 0 { device.heard.increment(by: heard.count) }
        guard record.window != nil || record.slotWait != nil || record.link != nil else { return }
        let adapter = adapter(record.peripheral.adapter)
        if let window = record.window { adapter.windowUsed.record(duration: window.used) }
        if let slotWait = record.slotWait { adapter.slotWait.record(duration: slotWait) }
        if let link = record.link { adapter.link.record(duration: link) }
    }

    /// The start of a phase: now, when metrics are on.
    func start(_ time: TimeBase) -> KeepAliveInstant? {
        enabled ? time.now : nil
    }

    /// A phase that began at `started` (from ``start(_:)``) ended now.
    func ended(_ phase: Phase, on adapter: String, since started: KeepAliveInstant?, _ time: TimeBase) {
        guard let started else { return }
        self.adapter(adapter).phases[phase]?.record(duration: started.duration(to: time.now))
    }

    /// A connect that began at `started` succeeded now: split into the link's making and service resolution when
    /// the transport says how long the latter took.
    func connected(
        on adapter: String, since started: KeepAliveInstant?, resolution: @autoclosure () -> Duration?,
        _ time: TimeBase
    ) {
        guard let started else { return }
        let total = started.duration(to: time.now)
        let handles = self.adapter(adapter)
        guard let resolution = resolution(), resolution <= total else {
            handles.phases[.connect]?.record(duration: total)
            return
        }
        handles.phases[.connect]?.record(duration: total - resolution)
        handles.phases[.serviceResolution]?.record(duration: resolution)
    }
}

extension Timer {
    /// Records a `Duration` in nanoseconds (swift-metrics' own unit), clamped at zero.
    fileprivate func record(duration: Duration) {
        let (seconds, attoseconds) = duration.components
        let nanoseconds = seconds &* 1_000_000_000 &+ attoseconds / 1_000_000_000
        recordNanoseconds(max(nanoseconds, 0))
    }
}
