import Basics

/// The package's one seeded generator (`SplitMix64`, in Basics) with the draws the simulator needs: all its
/// choices (topology, delays, faults) come from one of these, so a seed is a complete, replayable scenario.
public struct SimulationRandom: Sendable {
    private var generator: SplitMix64

    public init(seed: UInt64) {
        generator = SplitMix64(seed: seed)
    }

    public mutating func next() -> UInt64 {
        generator.next()
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
