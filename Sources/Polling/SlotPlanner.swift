import KeepAlive

/// Where in their intervals the devices sharing an adapter poll, so that their links stay within the adapter's
/// connection slots: the slot-aware placement. Pure and deterministic: devices in, phases out.
///
/// Time is cut into cells (a quarter of the shortest hold, 5–100 ms, coarser for long horizons) over the horizon
/// the grids repeat on (the least common multiple of the intervals, at most an hour). Each device, the heaviest
/// first (hold ÷ interval), takes the phase where its polls find a free slot: the fewest links beyond the slots at
/// the worst moment, then the fewest beyond the slots in all, then the phase it has now (devices that fit as they
/// are, a plan redone for a small change: nobody moves needlessly; a device never placed has phase 0, the grid
/// from the start), then the earliest. A hold counts every cell it touches, so a plan that fits in cells fits in
/// time.
///
/// When the devices need more slots than there are on average (the load, Σ hold ÷ interval, above the slots),
/// no placement avoids waiting: the phases are then spread evenly, and the connection limiter shares the waits
/// fairly.
///
/// ```swift
/// let plan = SlotPlanner.plan(devices, slots: 3)
/// if !plan.fits { logger.notice("hci0 is overbooked", metadata: ["load": "\(plan.load)"]) }
/// ```
package enum SlotPlanner {
    /// One device as placement sees it.
    package struct Device: Sendable, Hashable {
        package var key: String
        /// The interval it ticks at now (stretched in low power).
        package var interval: Duration
        /// How long one of its polls holds a slot: connect to the end of the disconnect.
        package var hold: Duration
        /// The phase it has now: kept when nothing better exists.
        package var current: Duration?

        package init(key: String, interval: Duration, hold: Duration, current: Duration? = nil) {
            self.key = key
            self.interval = interval
            self.hold = hold
            self.current = current
        }
    }

    /// Where each device polls, and how well that fits.
    package struct Plan: Sendable, Hashable {
        /// Per device key: its offset in its interval from the common origin.
        package var phases: [String: Duration] = [:]
        /// The slots the devices need on average: Σ hold ÷ interval.
        package var load: Double = 0
        /// The most links the plan has up at once.
        package var peak = 0
        package var slots: Int

        /// No poll waits for a slot while every poll holds its slot at most as long as planned.
        package var fits: Bool { peak <= slots }
    }

    /// The horizon is capped at an hour: intervals with no small common multiple (37 s and 41 s) drift against
    /// each other anyway.
    static let maximumHorizon: Int64 = 3_600_000
    /// Cells per horizon at most: the cell grows for long horizons.
    static let maximumCells: Int64 = 36_000
    /// Phases tried per device at most.
    static let maximumCandidates: Int64 = 512

    package static func plan(_ devices: [Device], slots: Int) -> Plan {
        var plan = Plan(slots: slots)
        guard !devices.isEmpty else { return plan }
        let placed = devices.map(Placed.init)
        plan.load = placed.reduce(0) { $0 + Double($1.hold) / Double($1.interval) }
        let horizon = placed.reduce(Int64(1)) { horizon, device in
            min(lcm(horizon, device.interval), maximumHorizon)
        }
        // A quarter of the shortest hold, between 5 and 100 ms: coarse cells would count a short poll as long as
        // the cell and spread quick devices further apart than their links need.
        let shortest = placed.lazy.map(\.hold).filter { $0 > 0 }.min() ?? 400
        let cell = max(min(max(shortest / 4, 5), 100), (horizon + maximumCells - 1) / maximumCells)
        var timeline = Timeline(horizon: horizon, cell: cell)

        if plan.load > Double(slots) {
            // Overbooked: nothing fits; spread evenly, in name order.
            let ordered = placed.sorted { $0.key < $1.key }
            for (index, device) in ordered.enumerated() {
                let phase = device.interval * Int64(index) / Int64(ordered.count)
                timeline.add(device, at: phase)
                plan.phases[device.key] = .milliseconds(phase)
            }
            plan.peak = timeline.peak
            return plan
        }
        let ordered = placed.sorted { lhs, rhs in
            let (left, right) = (lhs.hold * rhs.interval, rhs.hold * lhs.interval)
            return left != right ? left > right : lhs.key < rhs.key
        }
        for device in ordered {
            let phase = best(for: device, on: timeline, slots: slots)
            timeline.add(device, at: phase)
            plan.phases[device.key] = .milliseconds(phase)
        }
        plan.peak = timeline.peak
        return plan
    }

    /// The phase with the least excess (worst, then total), the current one on a tie, else the earliest.
    private static func best(for device: Placed, on timeline: Timeline, slots: Int) -> Int64 {
        let current = min(device.current ?? 0, device.interval - 1)
        var best = (cost: timeline.cost(of: device, at: current, slots: slots), phase: current)
        guard best.cost != .free else { return current }
        let step = max(timeline.cell, (device.interval + maximumCandidates - 1) / maximumCandidates)
        for phase in stride(from: Int64(0), to: device.interval, by: Int(step)) {
            let cost = timeline.cost(of: device, at: phase, slots: slots)
            if cost < best.cost { best = (cost, phase) }
            if cost == .free { break }
        }
        return best.phase
    }

    private static func lcm(_ a: Int64, _ b: Int64) -> Int64 {
        var (x, y) = (a, b)
        while y != 0 { (x, y) = (y, x % y) }
        let (product, overflow) = (a / x).multipliedReportingOverflow(by: b)
        return overflow ? Int64.max : product
    }

    /// A device in whole milliseconds.
    private struct Placed {
        var key: String
        var interval: Int64
        var hold: Int64
        var current: Int64?

        init(_ device: Device) {
            key = device.key
            interval = max(1, device.interval.milliseconds)
            // A hold as long as the interval holds a slot for good; one of no time (a test's manual clock) none.
            hold = min(max(0, device.hold.milliseconds), interval)
            current = device.current.map { $0.milliseconds }
        }
    }

    /// How many links each cell of the horizon has.
    private struct Timeline {
        /// Links beyond the slots the device's polls would meet: at the worst moment, and over all its cells.
        struct Cost: Comparable {
            var worst: Int
            var total: Int
            static let free = Cost(worst: 0, total: 0)
            static func < (lhs: Cost, rhs: Cost) -> Bool { (lhs.worst, lhs.total) < (rhs.worst, rhs.total) }
        }

        var links: [Int32]
        let cell: Int64
        let horizon: Int64
        private(set) var peak = 0

        init(horizon: Int64, cell: Int64) {
            links = Array(repeating: 0, count: Int(max(1, (horizon + cell - 1) / cell)))
            self.cell = cell
            self.horizon = horizon
        }

        /// The cells of each of the device's polls over the horizon; a poll that runs past its end goes on at its
        /// start (the grids repeat on the horizon).
        private func forEachCell(of device: Placed, at phase: Int64, _ body: (Int) -> Void) {
            guard device.hold > 0 else { return }
            var start = phase
            while start < horizon {
                let end = start + device.hold
                for index in start / cell...min(end, horizon - 1) / cell { body(Int(index)) }
                if end >= horizon {
                    for index in 0...(end - horizon) / cell { body(Int(index)) }
                }
                start += device.interval
            }
        }

        /// The excess the device's polls would meet at `phase`, themselves included.
        func cost(of device: Placed, at phase: Int64, slots: Int) -> Cost {
            var cost = Cost.free
            forEachCell(of: device, at: phase) { index in
                let excess = max(0, Int(self.links[index]) + 1 - slots)
                cost.worst = max(cost.worst, excess)
                cost.total += excess
            }
            return cost
        }

        mutating func add(_ device: Placed, at phase: Int64) {
            var touched: [Int] = []
            forEachCell(of: device, at: phase) { touched.append($0) }
            for index in touched {
                links[index] += 1
                peak = max(peak, Int(links[index]))
            }
        }
    }
}
