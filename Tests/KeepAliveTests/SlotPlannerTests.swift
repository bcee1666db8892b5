import KeepAlive
import Polling
import Testing

/// Slot-aware placement, pure: phases from ``SlotPlanner``, then every poll of every device over hours of virtual
/// time through the real ``ConnectionLimiter``, event by event, to count the waits for a slot.
@Suite("Slot placement")
struct SlotPlannerTests {
    /// One device of a simulation: its interval, how long each poll holds a slot, and its phase.
    struct Simulated {
        var key: String
        var interval: Int64
        var hold: Int64
        var phase: Int64
    }

    /// What the polls of one device met.
    struct Met {
        /// Per poll that got a slot: how long it waited, in milliseconds.
        var waits: [Int64] = []
        /// Polls whose window ended before a slot was free (`noSlot`).
        var noSlot = 0
        /// Ticks that found the previous poll still waiting or holding (skipped, never stacked).
        var skipped = 0
    }

    /// Every tick of `devices` on one adapter with `slots` for `duration` ms, through the real ``ConnectionLimiter``,
    /// as the engine uses it: a tick whose device still polls is skipped; a poll that has no slot when its window
    /// (two thirds of the interval, at most 20 s) ends gives up. Only ticks fired at or after `from` are counted
    /// (the steady state). Events run in time order; at one instant releases go first (a link that ended before
    /// the next began), then give-ups, then ticks.
    static func simulate(_ devices: [Simulated], slots: Int, duration: Int64, from: Int64 = 0) -> [String: Met] {
        enum Kind: Int { case release = 0, expire = 1, tick = 2 }
        struct Event {
            var time: Int64
            var kind: Kind
            var device: Int
            var fired: Int64
        }
        enum Polling { case idle, waiting(ConnectionLimiter.Ticket, fired: Int64), holding }
        let limiter = ConnectionLimiter(maxPerAdapter: slots)
        let handed = Handed()
        var events: [Event] = []
        for (index, device) in devices.enumerated() {
            for time in stride(from: device.phase, to: duration, by: Int(device.interval)) {
                events.append(Event(time: time, kind: .tick, device: index, fired: time))
            }
        }
        func order(_ event: Event) -> (Int64, Int, Int) { (event.time, event.kind.rawValue, event.device) }
        events.sort { order($0) < order($1) }
        func push(_ event: Event) {
            events.insert(event, at: events.firstIndex { order($0) > order(event) } ?? events.count)
        }
        var state = Array(repeating: Polling.idle, count: devices.count)
        var met: [String: Met] = [:]
        func hold(_ device: Int, fired: Int64, at now: Int64) {
            state[device] = .holding
            if fired >= from { met[devices[device].key, default: Met()].waits.append(now - fired) }
            push(Event(time: now + devices[device].hold, kind: .release, device: device, fired: fired))
        }
        while !events.isEmpty {
            let event = events.removeFirst()
            let (now, device) = (event.time, event.device)
            let key = devices[device].key
            switch event.kind {
            case .tick:
                guard case .idle = state[device] else {
                    if event.fired >= from { met[key, default: Met()].skipped += 1 }
                    continue
                }
                if let ticket = limiter.request(adapter: "hci0", key: key, granted: { handed.append(device) }) {
                    state[device] = .waiting(ticket, fired: now)
                    let budget = min(devices[device].interval * 2 / 3, 20_000)
                    push(Event(time: now + budget, kind: .expire, device: device, fired: now))
                } else {
                    hold(device, fired: now, at: now)
                }
            case .expire:
                guard case .waiting(let ticket, let fired) = state[device], fired == event.fired,
                    limiter.withdraw(ticket)
                else { continue }
                state[device] = .idle
                if fired >= from { met[key, default: Met()].noSlot += 1 }
            case .release:
                state[device] = .idle
                limiter.release(adapter: "hci0")
                for next in handed.take() {
                    guard case .waiting(_, let fired) = state[next] else { continue }
                    hold(next, fired: fired, at: now)
                }
            }
        }
        return met
    }

    /// The devices a release handed its slot to, in order (the limiter calls back synchronously).
    final class Handed: @unchecked Sendable {
        private var devices: [Int] = []
        func append(_ device: Int) { devices.append(device) }
        func take() -> [Int] {
            defer { devices = [] }
            return devices
        }
    }

    /// 20 devices of mixed intervals (10 s to 2 min) and holds (0.4 s to 4 s), in milliseconds.
    static let mixed: [(key: String, interval: Int64, hold: Int64)] = (0..<20).map { index in
        let intervals: [Int64] = [10_000, 15_000, 30_000, 60_000, 120_000]
        let holds: [Int64] = [400, 900, 2_100, 2_600, 4_000, 1_300, 3_200]
        return ("device-\(index)", intervals[index % intervals.count], holds[index % holds.count])
    }

    static func planned(_ devices: [(key: String, interval: Int64, hold: Int64)], slots: Int) -> (
        SlotPlanner.Plan, [Simulated]
    ) {
        let plan = SlotPlanner.plan(
            devices.map { .init(key: $0.key, interval: .milliseconds($0.interval), hold: .milliseconds($0.hold)) },
            slots: slots)
        let simulated = devices.map { device in
            Simulated(
                key: device.key, interval: device.interval, hold: device.hold,
                phase: Int64(
                    plan.phases[device.key]!.components.seconds * 1000
                        + plan.phases[device.key]!.components.attoseconds / 1_000_000_000_000_000))
        }
        return (plan, simulated)
    }

    @Test func threeSlotsTwentyMixedDevicesNeverWaitOncePlaced() {
        let load = Self.mixed.reduce(0.0) { $0 + Double($1.hold) / Double($1.interval) }
        #expect(load < 3, "the scenario must fit: load \(load)")
        // Unplaced (every grid from the start, as before placement): the ticks that coincide wait.
        let unplaced = Self.mixed.map { Simulated(key: $0.key, interval: $0.interval, hold: $0.hold, phase: 0) }
        let before = Self.simulate(unplaced, slots: 3, duration: 3_600_000)
        let waitedBefore = before.values.map { $0.waits.count { $0 > 0 } }.reduce(0, +)
        #expect(waitedBefore > 0)

        let (plan, placed) = Self.planned(Self.mixed, slots: 3)
        #expect(plan.fits && plan.peak <= 3, "peak \(plan.peak), load \(plan.load)")
        #expect(abs(plan.load - load) < 0.001)
        let after = Self.simulate(placed, slots: 3, duration: 3_600_000)
        #expect(
            after.values.allSatisfy { $0.waits.allSatisfy { $0 == 0 } && $0.noSlot == 0 && $0.skipped == 0 },
            "after placement: \(after.filter { $0.value.waits.contains { $0 > 0 } })")
        #expect(after.count == 20)
        // Every tick of every device polled: an hour of each device's interval.
        #expect(
            after.values.map(\.waits.count).reduce(0, +) == Self.mixed.map { Int(3_600_000 / $0.interval) }.reduce(0, +)
        )
        print("measured: 3 slots, 20 mixed devices, an hour: \(waitedBefore) polls waited unplaced, 0 placed")
    }

    @Test func thePlanIsDeterministicAndKeepsCurrentPhasesThatStillFit() {
        let devices = Self.mixed.map {
            SlotPlanner.Device(key: $0.key, interval: .milliseconds($0.interval), hold: .milliseconds($0.hold))
        }
        let first = SlotPlanner.plan(devices, slots: 3)
        #expect(SlotPlanner.plan(devices.reversed(), slots: 3).phases == first.phases)
        // Redone with the phases in force and one hold a little longer: nobody else moves.
        var again = devices.map { device in
            var device = device
            device.current = first.phases[device.key]
            return device
        }
        again[0].hold += .milliseconds(50)
        let second = SlotPlanner.plan(again, slots: 3)
        let moved = first.phases.filter { second.phases[$0.key] != $0.value }.map(\.key)
        #expect(moved.count <= 1, "moved: \(moved)")
        // Devices that fit as they are (all at phase 0, 3 of them on 3 slots) are not moved at all.
        let few = (0..<3).map { SlotPlanner.Device(key: "d\($0)", interval: .seconds(30), hold: .seconds(5)) }
        #expect(SlotPlanner.plan(few, slots: 3).phases.values.allSatisfy { $0 == .zero })
    }

    @Test func anOverbookedAdapterSpreadsTheWaitsFairlyAndSaysSo() {
        // 20 devices every 10 s holding 2 s on 3 slots: 4 slots' worth of links.
        let devices = (0..<20).map { (key: "device-\($0)", interval: Int64(10_000), hold: Int64(2_000)) }
        let (plan, placed) = Self.planned(devices, slots: 3)
        #expect(!plan.fits)
        #expect(abs(plan.load - 4) < 0.001)
        let met = Self.simulate(placed, slots: 3, duration: 3_600_000, from: 600_000)
        #expect(met.count == 20)
        // Every device gets its share: polls that ran, per device, within a fifth of the mean, and each waited.
        let ran = met.mapValues { Double($0.waits.count) }
        let mean = ran.values.reduce(0, +) / Double(ran.count)
        #expect(
            ran.values.allSatisfy { abs($0 - mean) <= mean / 5 }, "polls per device: \(ran.sorted { $0.key < $1.key })")
        let waited = met.mapValues { Double($0.waits.reduce(0, +)) / Double(max(1, $0.waits.count)) }
        let meanWait = waited.values.reduce(0, +) / Double(waited.count)
        #expect(meanWait > 0)
        #expect(
            waited.values.allSatisfy { $0 <= meanWait * 2 && $0 >= meanWait / 2 },
            "mean wait per device: \(waited.sorted { $0.key < $1.key })")
        // At most 3 of every 4 ticks can run: the rest skipped or gave up.
        let lost = met.values.map { $0.noSlot + $0.skipped }.reduce(0, +)
        print(
            """
            measured: overbooked 4/3 (20 × 2 s every 10 s, 3 slots), 50 min: \(Int(mean)) polls per device ran, \
            mean slot wait \(Int(meanWait)) ms (\(Int(waited.values.min()!))–\(Int(waited.values.max()!)) per device), \
            \(lost) ticks skipped or without a slot
            """)
    }

    @Test func longHorizonsAndZeroHoldsAreHandled() {
        // Intervals with no small common multiple (37 s, 41 s): the horizon is capped; the plan still fits.
        let devices = (0..<6).map {
            SlotPlanner.Device(key: "d\($0)", interval: .seconds($0 % 2 == 0 ? 37 : 41), hold: .seconds(3))
        }
        let plan = SlotPlanner.plan(devices, slots: 1)
        #expect(plan.phases.count == 6)
        #expect(plan.load < 1)
        // Polls that take no time (a manual clock's) take no slot: nobody moves.
        let instant = (0..<10).map { SlotPlanner.Device(key: "d\($0)", interval: .seconds(30), hold: .zero) }
        let still = SlotPlanner.plan(instant, slots: 3)
        #expect(still.fits && still.phases.values.allSatisfy { $0 == .zero })
        #expect(SlotPlanner.plan([], slots: 3).phases.isEmpty)
        // Short polls on one slot, an interval that is no whole number of cells: back to back, they fit (a poll
        // past the horizon's end wraps to its start and was once counted twice there).
        let quick = (0..<10).map { SlotPlanner.Device(key: "d\($0)", interval: .seconds(5), hold: .milliseconds(214)) }
        let packed = SlotPlanner.plan(quick, slots: 1)
        #expect(packed.fits, "peak \(packed.peak)")
        let (_, simulated) = Self.planned(
            quick.map { (key: $0.key, interval: Int64(5_000), hold: Int64(214)) }, slots: 1)
        let met = Self.simulate(simulated, slots: 1, duration: 600_000)
        #expect(met.values.allSatisfy { $0.waits.allSatisfy { $0 == 0 } && $0.noSlot == 0 })
    }
}
