// The fence (see QuietExecutors.swift): without the SPI this file is empty.
#if compiler(>=6.3) && os(Linux) && !KEEPALIVE_STOCK_EXECUTORS

    @_spi(ExperimentalCustomExecutors) import _Concurrency

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

#endif
