@_spi(ExperimentalCustomExecutors) @_spi(ExperimentalScheduling) import _Concurrency
#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

// MARK: - FIFO of jobs (ring buffer; guarded by the owner's mutex)

struct JobFIFO {
    private var buf: [UnownedJob?] = Array(repeating: nil, count: 64)
    private var head = 0
    private(set) var count = 0
    mutating func push(_ j: UnownedJob) {
        if count == buf.count {
            var nb = [UnownedJob?](repeating: nil, count: buf.count * 2)
            for i in 0..<count { nb[i] = buf[(head + i) & (buf.count - 1)] }
            buf = nb
            head = 0
        }
        buf[(head + count) & (buf.count - 1)] = j
        count += 1
    }
    mutating func pop() -> UnownedJob? {
        if count == 0 { return nil }
        let j = buf[head]
        buf[head] = nil
        head = (head + 1) & (buf.count - 1)
        count -= 1
        return j
    }
}

// MARK: - min-heap of delayed jobs

struct TimerHeap {
    struct Entry {
        var deadline: Int64
        var seq: UInt64
        var job: UnownedJob
    }
    private(set) var a: [Entry] = []
    var isEmpty: Bool { a.isEmpty }
    var count: Int { a.count }
    var minDeadline: Int64? { a.first?.deadline }
    @inline(__always) private func less(_ x: Entry, _ y: Entry) -> Bool {
        x.deadline != y.deadline ? x.deadline < y.deadline : x.seq < y.seq
    }
    mutating func push(_ e: Entry) {
        a.append(e)
        var i = a.count - 1
        while i > 0 {
            let p = (i - 1) / 2
            if less(a[i], a[p]) {
                a.swapAt(i, p)
                i = p
            } else {
                break
            }
        }
    }
    mutating func popMin() -> Entry {
        let top = a[0]
        let last = a.removeLast()
        if !a.isEmpty {
            a[0] = last
            var i = 0
            while true {
                let l = 2 * i + 1
                let r = l + 1
                var m = i
                if l < a.count && less(a[l], a[m]) { m = l }
                if r < a.count && less(a[r], a[m]) { m = r }
                if m == i { break }
                a.swapAt(i, m)
                i = m
            }
        }
        return top
    }
}
