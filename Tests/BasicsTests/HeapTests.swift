import Basics
import Testing

/// The one priority queue: elements come out smallest first, and a tracked element can leave from anywhere.
@Suite("Heap")
struct HeapTests {
    final class Item: Comparable, @unchecked Sendable {
        // @unchecked Sendable: the test touches items from its own task only.
        let key: Int
        var index = -1
        init(_ key: Int) { self.key = key }
        static func < (lhs: Item, rhs: Item) -> Bool { lhs.key < rhs.key }
        static func == (lhs: Item, rhs: Item) -> Bool { lhs === rhs }
    }

    @Test func elementsComeOutSmallestFirst() {
        var generator = SplitMix64(seed: 7)
        let keys = (0..<500).map { _ in Int.random(in: 0..<1000, using: &generator) }
        var heap = Heap<Int>()
        for key in keys { heap.insert(key) }
        var out: [Int] = []
        while let key = heap.popMin() { out.append(key) }
        #expect(out == keys.sorted())
        #expect(Heap(keys).min == keys.min())
    }

    @Test func aTrackedElementKnowsItsPlaceAndLeavesFromAnywhere() {
        var generator = SplitMix64(seed: 11)
        var heap = Heap<Item>(positions: { item, index in item.index = index })
        let items = (0..<300).map { _ in Item(Int.random(in: 0..<1000, using: &generator)) }
        for item in items { heap.insert(item) }
        for item in items { #expect(heap.storage[item.index] === item) }
        // Every third leaves early, from wherever it is.
        var left = Set<ObjectIdentifier>()
        for item in items where item.key % 3 == 0 {
            #expect(heap.remove(at: item.index) === item)
            left.insert(ObjectIdentifier(item))
        }
        for item in items where !left.contains(ObjectIdentifier(item)) { #expect(heap.storage[item.index] === item) }
        var out: [Int] = []
        while let item = heap.popMin() { out.append(item.key) }
        #expect(out == items.filter { !left.contains(ObjectIdentifier($0)) }.map(\.key).sorted())
    }
}
