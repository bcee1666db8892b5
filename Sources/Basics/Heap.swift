/// A binary min-heap, the package's one priority queue: the timer thread's deadlines, the ledger's, the connection
/// limiter's waiters, a D-Bus connection's outstanding calls.
///
/// Inlinable, so that a heap of one module's elements is specialized there: the D-Bus connection's outstanding
/// calls go through it several times a poll. Elements that must leave before their turn (a call answered before
/// its deadline) are tracked through `positions`, told each element's index whenever it moves, and leave with
/// ``remove(at:)``.
package struct Heap<Element: Comparable> {
    @usableFromInline package internal(set) var storage: [Element] = []
    /// Told where an element now sits after it moved (`nil`: nobody needs to know).
    @usableFromInline let positions: (@Sendable (Element, Int) -> Void)?

    @inlinable package var count: Int { storage.count }
    @inlinable package var isEmpty: Bool { storage.isEmpty }
    @inlinable package var min: Element? { storage.first }

    package init() {
        positions = nil
    }

    /// An empty heap that tells `positions` every element's index as it moves.
    package init(positions: @escaping @Sendable (Element, Int) -> Void) {
        self.positions = positions
    }

    package init(_ elements: [Element]) {
        positions = nil
        storage = elements
        var index = storage.count / 2
        while index > 0 {
            index -= 1
            siftDown(from: index)
        }
    }

    @inlinable package mutating func insert(_ element: Element) {
        storage.append(element)
        positions?(element, storage.count - 1)
        siftUp(from: storage.count - 1)
    }

    @discardableResult
    @inlinable package mutating func popMin() -> Element? {
        guard !storage.isEmpty else { return nil }
        return remove(at: 0)
    }

    /// Takes out the element at `index` (one that ``init(positions:)`` said is there).
    @discardableResult
    @inlinable package mutating func remove(at index: Int) -> Element {
        precondition(storage.indices.contains(index), "heap index out of range")
        let removed = storage[index]
        let last = storage.removeLast()
        if index < storage.count {
            storage[index] = last
            positions?(last, index)
            siftDown(from: index)
            siftUp(from: index)
        }
        return removed
    }

    @inlinable mutating func swapAt(_ first: Int, _ second: Int) {
        storage.swapAt(first, second)
        if let positions {
            positions(storage[first], first)
            positions(storage[second], second)
        }
    }

    @inlinable mutating func siftUp(from start: Int) {
        var child = start
        while child > 0 {
            let parent = (child - 1) / 2
            guard storage[child] < storage[parent] else { return }
            swapAt(child, parent)
            child = parent
        }
    }

    @inlinable mutating func siftDown(from start: Int) {
        var parent = start
        let count = storage.count
        while true {
            let left = 2 * parent + 1
            guard left < count else { return }
            var smallest = left
            let right = left + 1
            if right < count, storage[right] < storage[left] { smallest = right }
            guard storage[smallest] < storage[parent] else { return }
            swapAt(smallest, parent)
            parent = smallest
        }
    }
}

extension Heap: Sendable where Element: Sendable {}
