import Basics
import Testing
@testable import DBus

extension DBusTests {
    /// The table of outstanding method calls: by serial, with their deadlines in a heap.
    @Suite struct OutstandingCallsTable {
        /// Catches: a heap that loses its order when calls leave from the middle (a call timing out late or
        /// early), a removed call that still times out, and a call without a deadline that does.
        @Test func callsTimeOutInDeadlineOrderWhateverLeavesInBetween() throws {
            let message = try DBusMessage.methodCall(destination: nil, path: "/", interface: nil, member: "Ping")
            var generator = SplitMix64(seed: 42)
            var calls = OutstandingCalls()
            var expected: [UInt32: Int64] = [:]
            for serial in UInt32(1)...2_000 {
                let box = ReplyBox(message: message, timeout: .seconds(1))
                box.serial = serial
                // Every tenth never times out; the others at random, with repeats.
                box.deadline = serial % 10 == 0 ? ReplyBox.noDeadline : Int64(generator.next() % 500)
                calls.insert(box)
                expected[serial] = box.deadline
                // Now and then a reply comes for a random earlier call.
                if serial % 3 == 0 {
                    let answered = UInt32(generator.next() % UInt64(serial)) + 1
                    let removed = calls.remove(serial: answered)
                    #expect((removed != nil) == (expected[answered] != nil))
                    #expect(removed.map { $0.heapIndex } ?? -1 == -1)
                    expected[answered] = nil
                }
            }
            #expect(calls.count == expected.count)
            #expect(calls.earliestDeadline == expected.values.filter { $0 != ReplyBox.noDeadline }.min())
            var now: Int64 = 0
            while now < 500 {
                now += Int64(generator.next() % 40)
                let due = calls.removeDue(now: now)
                #expect(due.map(\.deadline) == due.map(\.deadline).sorted())
                let dueSerials = Set(due.map(\.serial))
                let shouldBeDue = Set(expected.filter { $0.value <= now }.keys)
                #expect(dueSerials == shouldBeDue)
                for serial in dueSerials { expected[serial] = nil }
                if let earliest = calls.earliestDeadline { #expect(earliest > now) }
            }
            // What is left never times out, and goes with removeAll.
            #expect(expected.values.allSatisfy { $0 == ReplyBox.noDeadline })
            #expect(calls.removeDue(now: .max - 1).isEmpty)
            #expect(Set(calls.removeAll().map(\.serial)) == Set(expected.keys))
            #expect(calls.isEmpty)
            #expect(calls.earliestDeadline == nil)
        }

        /// Catches: a call sent 2³² calls after one still waiting with the same serial (libdbus's serials wrap)
        /// silently replacing it — the older call would never end, and its timeout would remove the newer one.
        @Test func aReusedSerialDisplacesTheOlderCall() throws {
            let message = try DBusMessage.methodCall(destination: nil, path: "/", interface: nil, member: "Ping")
            var calls = OutstandingCalls()
            let old = ReplyBox(message: message, timeout: .seconds(1))
            old.serial = 5
            old.deadline = 10
            let new = ReplyBox(message: message, timeout: .seconds(1))
            new.serial = 5
            new.deadline = ReplyBox.noDeadline
            #expect(calls.insert(old) == nil)
            #expect(calls.insert(new) === old)
            #expect(old.heapIndex == -1)
            #expect(calls.earliestDeadline == nil)
            #expect(calls.removeDue(now: 10).isEmpty)
            #expect(calls.remove(serial: 5) === new)
            #expect(calls.isEmpty)
        }
    }
}
