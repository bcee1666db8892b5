/// A binary min-heap: the timer thread's, the ledger's and the connection limiter's priority queues.
package struct Heap<Element: Comparable> {
    package private(set) var storage: [Element] = []

    package var count: Int { storage.count }
    package var isEmpty: Bool { storage.isEmpty }
    package var min: Element? { storage.first }

    package init() {}

    package init(_ elements: [Element]) {
        storage = elements
        var index = storage.count / 2
        while index > 0 {
            index -= 1
            siftDown(from: index)
        }
    }

    package mutating func insert(_ element: Element) {
        storage.append(element)
        siftUp(from: storage.count - 1)
    }

    @discardableResult
    package mutating func popMin() -> Element? {
        guard !storage.isEmpty else { return nil }
        storage.swapAt(0, storage.count - 1)
        let result = storage.removeLast()
        if !storage.isEmpty { siftDown(from: 0) }
        return result
    }

    private mutating func siftUp(from start: Int) {
        var child = start
        while child > 0 {
            let parent = (child - 1) / 2
            guard storage[child] < storage[parent] else { return }
            storage.swapAt(child, parent)
            child = parent
        }
    }

    private mutating func siftDown(from start: Int) {
        var parent = start
        let count = storage.count
        while true {
            let left = 2 * parent + 1
            guard left < count else { return }
            var smallest = left
            let right = left + 1
            if right < count, storage[right] < storage[left] { smallest = right }
            guard storage[smallest] < storage[parent] else { return }
            storage.swapAt(smallest, parent)
            parent = smallest
        }
    }
}
