/// The range a decoded number must lie in, bounds included.
///
/// Not a `ClosedRange` on purpose: configuration may write a minimum above the maximum, and
/// `ClosedRange` would trap on construction; here that is representable and ``Field/validate()``
/// reports it.
public struct ValidRange: Sendable, Hashable, CustomStringConvertible {
    /// The smallest valid value.
    public var minimum: Double
    /// The largest valid value.
    public var maximum: Double

    /// Creates a range; `minimum > maximum` is allowed here and rejected by validation.
    public init(minimum: Double, maximum: Double) {
        self.minimum = minimum
        self.maximum = maximum
    }

    /// Creates a range from a `ClosedRange` (which is always well ordered).
    public init(_ range: ClosedRange<Double>) {
        self.init(minimum: range.lowerBound, maximum: range.upperBound)
    }

    /// Whether `value` lies within the bounds (never for NaN).
    public func contains(_ value: Double) -> Bool {
        value >= minimum && value <= maximum
    }

    /// Whether the bounds are numbers and ordered.
    public var isWellFormed: Bool { !minimum.isNaN && !maximum.isNaN && minimum <= maximum }

    public var description: String { "\(minimum)…\(maximum)" }
}
