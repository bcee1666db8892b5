/// A binary min-heap of events on the virtual clock. Events at the same instant come out in the order they were
/// scheduled, so a run depends on nothing but the seed.
struct EventQueue<Event> {
    private struct Entry {
        var time: Int64
        var order: UInt64
        var event: Event
        func precedes(_ other: Entry) -> Bool { time != other.time ? time < other.time : order < other.order }
    }

    private var heap: [Entry] = []
    private var nextOrder: UInt64 = 0

    var isEmpty: Bool { heap.isEmpty }
    var count: Int { heap.count }

    mutating func schedule(_ event: Event, at time: Int64) {
        heap.append(Entry(time: time, order: nextOrder, event: event))
        nextOrder += 1
        var child = heap.count - 1
        while child > 0 {
            let parent = (child - 1) / 2
            guard heap[child].precedes(heap[parent]) else { break }
            heap.swapAt(child, parent)
            child = parent
        }
    }

    mutating func pop() -> (time: Int64, event: Event)? {
        guard !heap.isEmpty else { return nil }
        heap.swapAt(0, heap.count - 1)
        let entry = heap.removeLast()
        var parent = 0
        while true {
            let left = 2 * parent + 1
            let right = left + 1
            var smallest = parent
            if left < heap.count, heap[left].precedes(heap[smallest]) { smallest = left }
            if right < heap.count, heap[right].precedes(heap[smallest]) { smallest = right }
            guard smallest != parent else { break }
            heap.swapAt(parent, smallest)
            parent = smallest
        }
        return (entry.time, entry.event)
    }
}
