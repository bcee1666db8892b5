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
    private var heap: [ReplyBox] = []

    var count: Int { bySerial.count }
    var isEmpty: Bool { bySerial.isEmpty }

    /// The earliest deadline (nanoseconds since boot, `ConnectionThread.now()`), nil without one.
    var earliestDeadline: Int64? { heap.first?.deadline }

    /// Adds a sent call; one without a deadline (`ReplyBox.noDeadline`) never times out. Returns the call it
    /// displaced: one still waiting with the same serial, sent 2³² calls before (libdbus's serials wrap), which
    /// the caller must fail — its reply can no longer be told apart.
    @discardableResult
    mutating func insert(_ box: ReplyBox) -> ReplyBox? {
        let displaced = bySerial.updateValue(box, forKey: box.serial)
        if let displaced { removeFromHeap(displaced) }
        if box.deadline != ReplyBox.noDeadline {
            box.heapIndex = heap.count
            heap.append(box)
            siftUp(heap.count - 1)
        }
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
        while let first = heap.first, first.deadline <= now {
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
        for box in heap { box.heapIndex = -1 }
        heap.removeAll()
        return all
    }

    // MARK: The heap

    private mutating func removeFromHeap(_ box: ReplyBox) {
        let index = box.heapIndex
        guard index >= 0 else { return }
        box.heapIndex = -1
        let last = heap.removeLast()
        guard index < heap.count else { return }
        heap[index] = last
        last.heapIndex = index
        siftDown(index)
        siftUp(index)
    }

    private mutating func siftUp(_ start: Int) {
        var index = start
        while index > 0 {
            let parent = (index - 1) / 2
            guard heap[index].deadline < heap[parent].deadline else { return }
            swapAt(index, parent)
            index = parent
        }
    }

    private mutating func siftDown(_ start: Int) {
        var index = start
        while true {
            let left = 2 * index + 1
            guard left < heap.count else { return }
            let right = left + 1
            let child = right < heap.count && heap[right].deadline < heap[left].deadline ? right : left
            guard heap[child].deadline < heap[index].deadline else { return }
            swapAt(index, child)
            index = child
        }
    }

    private mutating func swapAt(_ first: Int, _ second: Int) {
        heap.swapAt(first, second)
        heap[first].heapIndex = first
        heap[second].heapIndex = second
    }
}
