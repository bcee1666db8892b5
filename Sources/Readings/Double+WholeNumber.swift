extension Double {
    // Double's `rounded()` and `Int64(exactly:)` lower to libm's `round`/`trunc` on baseline
    // x86-64, and without Foundation nothing links libm: these use only the conversion
    // instruction (`Int64(_:)`, which truncates), guarded so it can never trap.

    /// -2^63 and 2^63: the conversion to Int64 is defined strictly inside [lower, upper).
    private static let int64Lower = -9_223_372_036_854_775_808.0
    private static let int64Upper = 9_223_372_036_854_775_808.0

    /// The value as an `Int64` when it is a whole number in range, else `nil`.
    var exactInt64: Int64? {
        guard self >= Self.int64Lower, self < Self.int64Upper else { return nil }
        let truncated = Int64(self)
        return Double(truncated) == self ? truncated : nil
    }

    /// The value as a `UInt64` when it is a whole number in range, else `nil`.
    var exactUInt64: UInt64? {
        guard self >= 0, self < Self.int64Upper * 2 else { return nil }
        let truncated = UInt64(self)
        return Double(truncated) == self ? truncated : nil
    }

    /// The nearest `Int64`, halves away from zero, or `nil` when out of range or not a number.
    var roundedInt64: Int64? {
        guard self > Self.int64Lower + 1, self < Self.int64Upper - 1024 else { return nil }
        let truncated = Int64(self)
        let fraction = self - Double(truncated)
        if fraction >= 0.5 { return truncated &+ 1 }
        if fraction <= -0.5 { return truncated &- 1 }
        return truncated
    }
}
