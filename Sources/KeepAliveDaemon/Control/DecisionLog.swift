/// A device's recent decisions, newest last, at most ``capacity`` runs: a run of like decisions (a hundred good
/// polls, an hour of backing off) is one entry with its first and last time and a count, so the log reaches back
/// far for a steady device and still holds the detail of a bad hour. The strings the entries name are interned in
/// ``Strings``, shared by every device's log.
struct DecisionLog: Sendable {
    /// Runs kept per device: 20 × 48 bytes at most (measured per device in BENCHMARKS.md).
    static let capacity = 20

    /// The strings the decisions name (codes, actions, gateways, adapters), each stored once; 0 is "none".
    struct Strings: Sendable {
        private var indices: [String: UInt16] = [:]
        private var values: [String] = [""]

        /// The string's number, adding it when new. Past 65,535 distinct strings (codes come from a closed set,
        /// gateways and adapters from configurations), new ones share the last number rather than grow.
        mutating func intern(_ string: String?) -> UInt16 {
            guard let string, !string.isEmpty else { return 0 }
            if let index = indices[string] { return index }
            guard values.count <= Int(UInt16.max) else { return UInt16.max }
            let index = UInt16(values.count)
            values.append(string)
            indices[string] = index
            return index
        }

        subscript(index: UInt16) -> String? {
            index == 0 || Int(index) >= values.count ? nil : values[Int(index)]
        }
    }

    /// Ring storage: `start` is the oldest entry once the ring is full.
    private var entries: [Decision] = []
    private var start = 0

    /// Adds `decision`, folding it into the newest run when it continues it.
    mutating func append(_ decision: Decision) {
        if let newest = newestIndex, entries[newest].isLike(decision) {
            entries[newest].last = decision.last
            entries[newest].count &+= 1
            entries[newest].value = decision.value
            entries[newest].next = decision.next
            return
        }
        if entries.count < Self.capacity {
            // Grown by hand, to exactly the capacity at most: the array's own doubling would reach 32.
            if entries.count == entries.capacity {
                entries.reserveCapacity(min(Self.capacity, max(4, entries.count * 2)))
            }
            entries.append(decision)
        } else {
            entries[start] = decision
            start = (start + 1) % Self.capacity
        }
    }

    /// Oldest first.
    var decisions: [Decision] {
        Array(entries[start...] + entries[..<start])
    }

    private var newestIndex: Int? {
        guard !entries.isEmpty else { return nil }
        return entries.count < Self.capacity ? entries.count - 1 : (start + Self.capacity - 1) % Self.capacity
    }
}
