/// SplitMix64: tiny, fast, and the same sequence on every platform for a seed — all the simulator's choices
/// (topology, delays, faults) come from one of these, so a seed is a complete, replayable scenario.
public struct SimulationRandom: Sendable {
    private var state: UInt64

    public init(seed: UInt64) {
        state = seed
    }

    public mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var mixed = state
        mixed = (mixed ^ (mixed >> 30)) &* 0xBF58_476D_1CE4_E5B9
        mixed = (mixed ^ (mixed >> 27)) &* 0x94D0_49BB_1331_11EB
        return mixed ^ (mixed >> 31)
    }

    /// Uniform in `range` (the tiny modulo bias is irrelevant for a simulation).
    public mutating func integer(in range: ClosedRange<Int64>) -> Int64 {
        let width = UInt64(range.upperBound - range.lowerBound) &+ 1
        return range.lowerBound + Int64(bitPattern: width == 0 ? next() : next() % width)
    }

    public mutating func integer(in range: Range<Int>) -> Int {
        Int(integer(in: Int64(range.lowerBound)...Int64(range.upperBound - 1)))
    }

    /// True with probability `permille` / 1000.
    public mutating func chance(permille: Int) -> Bool {
        integer(in: 0..<1000) < permille
    }
}
