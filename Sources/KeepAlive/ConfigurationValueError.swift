/// A configuration value the library cannot work with, built in code: a non-positive interval, a window budget
/// that does not fit in its interval, two devices with one name…
///
/// Thrown by the initialisers that take a configuration
/// (``KeepAlive/init(configuration:clock:powerSource:randomNumberGenerator:logger:)``,
/// `PollEngine` (module Polling), ``BackgroundTaskLedger``) and by
/// ``KeepAlive/register(name:options:onReport:handler:)``. The
/// daemon's configuration file runs the same checks and reports the same reasons at the file's line and column.
public struct ConfigurationValueError: Error, Hashable, Sendable, CustomStringConvertible {
    /// The value's place, spelled as in code: `KeepAlive.Configuration.windowBudget`,
    /// `PollEngine.peripherals[3].name`.
    public var field: String
    /// What is wrong and what would be right, e.g. "must be shorter than the interval (30s)".
    public var reason: String

    public init(field: String, reason: String) {
        self.field = field
        self.reason = reason
    }

    public var description: String { "\(field): \(reason)" }
}
