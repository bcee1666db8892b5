public import KeepAlive
import Basics

/// A power state set by hand — a command, a configuration key — usually as the override of a
/// ``CombinedPowerSource``: while it is set, it wins over everything the host says.
///
/// `nil` means "no override"; as a source of its own, that reads as `.normal`.
///
/// ```swift
/// let manual = ManualPowerSource()
/// let power = CombinedPowerSource([upower, profiles], override: manual)
/// manual.set(.critical)   // pause polling, whatever the battery says
/// manual.set(nil)         // back to what the host says
/// ```
public final class ManualPowerSource: PowerSource {
    private let current: Locked<PowerState?>
    private let cell: PowerStateCell
    private let overrides = Broadcast<PowerState?>(bufferSize: 64)

    public init(_ override: PowerState? = nil) {
        current = Locked(override)
        cell = PowerStateCell(override ?? .normal)
    }

    /// The override, or nil when there is none.
    public var override: PowerState? {
        current.withLock { $0 }
    }

    /// The override, `.normal` without one.
    public var state: PowerState {
        cell.state
    }

    /// Every change of ``state`` (so setting `nil` after `.normal` yields nothing here; see ``overrideChanges()``).
    public func updates() -> AsyncStream<PowerState> {
        cell.subscribe()
    }

    /// Every change of ``override``, `nil` included.
    public func overrideChanges() -> AsyncStream<PowerState?> {
        overrides.subscribe()
    }

    /// Sets the override; `nil` removes it.
    public func set(_ state: PowerState?) {
        // Both updates under one lock, so that concurrent setters reach every stream in the same order.
        current.withLock { current in
            guard current != state else { return }
            current = state
            cell.set(state ?? .normal)
            overrides.publish(state)
        }
    }
}
