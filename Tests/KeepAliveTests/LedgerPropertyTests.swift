import Basics
import KeepAlive
import KeepAliveTesting
import Testing

@Suite("Background task ledger: property")
struct LedgerPropertyTests {
    /// 10,000 seeded random sequences (1,000 under ThreadSanitizer: `Sanitizers.rounds`) of begin / end / advance /
    /// close / reopen / expireAll. After every step the ledger's timers are processed and the invariants checked:
    /// no window is open past its deadline plus the grace, every window begun is either open or in the history
    /// exactly once, and outcomes match what happened to the window.
    @Test func randomSequencesNeverLeaveAWindowOpenPastDeadlinePlusGrace() throws {
        var random = SeededRandomNumberGenerator(seed: 0x5EED)
        let grace = Duration.seconds(2)
        var totalSteps = 0
        for sequence in 0..<Sanitizers.rounds(10_000) {
            let clock = TestClock()
            let ledger = try BackgroundTaskLedger(
                configuration: .init(gracePeriod: grace, historyCapacity: 10_000),
                clock: clock,
                logger: quietLogger
            )
            var begun: [BackgroundTaskID: (budget: Duration, began: KeepAliveInstant)] = [:]
            var endedByUs: [BackgroundTaskID: KeepAliveInstant] = [:]
            var expiredEarly = Set<BackgroundTaskID>()
            var refused = 0
            let steps = Int.random(in: 1...30, using: &random)
            totalSteps += steps
            for _ in 0..<steps {
                let now = KeepAliveInstant(offset: clock.now.offset)
                switch Int.random(in: 0..<100, using: &random) {
                case 0..<35:
                    let budget = Duration.milliseconds(Int64.random(in: 1...20_000, using: &random))
                    let id = ledger.begin(name: "s\(sequence)", budget: budget)
                    if id == .invalid { refused += 1 } else { begun[id] = (budget, now) }
                case 35..<60:
                    let open = ledger.openEntries
                    if let entry = open.randomElement(using: &random), ledger.end(entry.id) != nil {
                        endedByUs[entry.id] = now
                    }
                case 60..<65:
                    // Any id: invalid, already ended, never issued, or (by chance) open.
                    let id = BackgroundTaskID(rawValue: UInt64.random(in: 0...100, using: &random))
                    if ledger.end(id) != nil { endedByUs[id] = now }
                case 65..<90:
                    clock.advance(by: .milliseconds(Int64.random(in: 0...15_000, using: &random)))
                case 90..<94:
                    ledger.close()
                case 94..<97:
                    ledger.reopen()
                default:
                    expiredEarly.formUnion(ledger.openEntries.filter { $0.phase != .expired }.map(\.id))
                    ledger.expireAll()
                }
                ledger.processDueTimers()
                let current = KeepAliveInstant(offset: clock.now.offset)
                for entry in ledger.openEntries {
                    #expect(
                        current <= entry.deadline + grace || expiredEarly.contains(entry.id),
                        "sequence \(sequence): \(entry.id) open at \(current), deadline \(entry.deadline)"
                    )
                    #expect(entry.phase == .expired || current < entry.deadline, "sequence \(sequence): not expired")
                }
            }
            // Let everything run out, then check the books.
            clock.advance(by: .seconds(60))
            ledger.processDueTimers()
            #expect(ledger.openCount == 0, "sequence \(sequence)")
            let history = ledger.history()
            #expect(history.count == begun.count + refused, "sequence \(sequence): every window recorded once")
            #expect(Set(history.map(\.id)).count == history.count)
            for record in history where record.outcome != .refused {
                guard let window = begun[record.id] else {
                    Issue.record("sequence \(sequence): unknown id \(record.id) in history")
                    continue
                }
                #expect(record.budget == window.budget)
                #expect(record.ended <= record.began + window.budget + grace || expiredEarly.contains(record.id))
                switch record.outcome {
                case .completed:
                    #expect(endedByUs[record.id] != nil && record.ended <= record.began + window.budget)
                case .expired, .cancelled:
                    #expect(endedByUs[record.id] != nil)
                case .forcedEnd:
                    #expect(endedByUs[record.id] == nil)
                case .refused:
                    break
                }
            }
        }
        #expect(totalSteps > Sanitizers.rounds(100_000))
    }
}
