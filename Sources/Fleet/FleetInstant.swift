/// A reading of the gateway's own monotonic clock, in nanoseconds from an arbitrary origin.
///
/// The daemon must read `CLOCK_BOOTTIME` (which keeps counting through suspend), not `CLOCK_MONOTONIC` (which
/// stops: a holder that slept would wake believing its lease still ran) and never the wall clock (which jumps).
/// Only differences of instants of one gateway are ever used; two gateways' instants are never compared.
public struct FleetInstant: Comparable, Hashable, Sendable, CustomStringConvertible {
    public var nanoseconds: Int64

    public init(nanoseconds: Int64) {
        self.nanoseconds = nanoseconds
    }

    public static func < (left: FleetInstant, right: FleetInstant) -> Bool { left.nanoseconds < right.nanoseconds }

    /// Saturating, so that a far deadline never traps.
    public static func + (instant: FleetInstant, nanoseconds: Int64) -> FleetInstant {
        let (sum, overflow) = instant.nanoseconds.addingReportingOverflow(nanoseconds)
        return FleetInstant(nanoseconds: overflow ? (nanoseconds > 0 ? .max : .min) : sum)
    }

    public var description: String { "\(nanoseconds)ns" }
}
