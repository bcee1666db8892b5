import Basics

/// The method calls a connection has sent and waits for, by serial, with their deadlines in a binary heap.
///
/// Why not libdbus's pending calls (`dbus_connection_send_with_reply`, the first design): libdbus builds the
/// `NoReply` error for a timeout *when the call is sent*, for every call, in case it is needed — by callgrind, about
/// half of libdbus's work per round trip (Benchmarks/NOTES.md has the figures). Here a call is sent
/// with `dbus_connection_send`, its reply comes through the connection's message filter and is found by its
/// reply serial, and a timeout is a deadline on the connection's thread; the error is built only for a call
/// that does time out.
///
/// A call completes in O(1) on average (a dictionary), its deadline enters and leaves the heap in O(log n).
///
/// ```swift
/// var calls = OutstandingCalls()
/// calls.insert(box)                                  // box.serial and box.deadline set
/// let answered = calls.remove(serial: replySerial)   // the reply came
/// let late = calls.removeDue(now: ConnectionThread.now())
/// ```
struct OutstandingCalls {
    private var bySerial: [UInt32: ReplyBox] = [:]
    /// Calls with a deadline, earliest first (`ReplyBox.heapIndex` is each one's place).
    private var heap = Heap<ReplyBox>(positions: { box, index in box.heapIndex = index })

    var count: Int { bySerial.count }
    var isEmpty: Bool { bySerial.isEmpty }

    /// The earliest deadline (nanoseconds since boot, `ConnectionThread.now()`), nil without one.
    var earliestDeadline: Int64? { heap.min?.deadline }

    /// Adds a sent call; one without a deadline (`ReplyBox.noDeadline`) never times out. Returns the call it
    /// displaced: one still waiting with the same serial, sent 2³² calls before (libdbus's serials wrap), which
    /// the caller must fail — its reply can no longer be told apart.
    @discardableResult
    mutating func insert(_ box: ReplyBox) -> ReplyBox? {
        let displaced = bySerial.updateValue(box, forKey: box.serial)
        if let displaced { removeFromHeap(displaced) }
        if box.deadline != ReplyBox.noDeadline { heap.insert(box) }
        return displaced
    }

    /// Removes and returns the call waiting for the reply to `serial`, if any.
    mutating func remove(serial: UInt32) -> ReplyBox? {
        guard let box = bySerial.removeValue(forKey: serial) else { return nil }
        removeFromHeap(box)
        return box
    }

    /// Removes and returns every call whose deadline is at or before `now`, earliest first.
    mutating func removeDue(now: Int64) -> [ReplyBox] {
        var due: [ReplyBox] = []
        while let first = heap.min, first.deadline <= now {
            removeFromHeap(first)
            bySerial[first.serial] = nil
            due.append(first)
        }
        return due
    }

    /// Removes and returns every call.
    mutating func removeAll() -> [ReplyBox] {
        let all = Array(bySerial.values)
        bySerial.removeAll()
        while let box = heap.popMin() { box.heapIndex = -1 }
        return all
    }

    private mutating func removeFromHeap(_ box: ReplyBox) {
        guard box.heapIndex >= 0 else { return }
        heap.remove(at: box.heapIndex)
        box.heapIndex = -1
    }
}

/// Calls are ordered by deadline in the heap; two calls are the same only if they are one object.
extension ReplyBox: Comparable {
    static func < (lhs: ReplyBox, rhs: ReplyBox) -> Bool { lhs.deadline < rhs.deadline }
    static func == (lhs: ReplyBox, rhs: ReplyBox) -> Bool { lhs === rhs }
}
