/// A gateway's monotonic clock as seen from the simulator's true (virtual) time: an arbitrary offset plus a rate
/// error within ±ρ. Both directions are exact integer functions, so a deadline converts to the first true
/// instant at which the gateway's clock has reached it.
public struct DriftingClock: Sendable {
    public var offsetNanoseconds: Int64
    /// Rate error in parts per million: +1000 means this clock runs 0.1 % fast.
    public var driftPartsPerMillion: Int64

    public init(offsetNanoseconds: Int64, driftPartsPerMillion: Int64) {
        self.offsetNanoseconds = offsetNanoseconds
        self.driftPartsPerMillion = driftPartsPerMillion
    }

    public func local(atTrue time: Int64) -> Int64 {
        offsetNanoseconds + time + Int64(Int128(time) * Int128(driftPartsPerMillion) / 1_000_000)
    }

    /// The earliest true instant at which this clock reads at least `local`.
    public func trueTime(atLocal local: Int64) -> Int64 {
        let elapsed = Int128(local) - Int128(offsetNanoseconds)
        var guess = Int64(clamping: elapsed * 1_000_000 / Int128(1_000_000 + driftPartsPerMillion))
        while self.local(atTrue: guess) < local { guess += 1 }
        while guess > Int64.min, self.local(atTrue: guess - 1) >= local { guess -= 1 }
        return guess
    }
}
