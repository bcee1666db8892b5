import Basics

/// A condition a deferred task may require, as a value the app provides: the daemon's network condition is its
/// MQTT broker's connection. iOS reads these from the system; a gateway knows better what "the network" means.
///
/// Contract, as ``PowerSource``'s: ``isSatisfied`` is cheap and never blocks; ``changes()`` returns a new stream
/// for each caller, which yields every change after the call (not necessarily the current value), in order.
public protocol DeferredTaskCondition: Sendable {
    var isSatisfied: Bool { get }
    func changes() -> AsyncStream<Bool>
}

/// A condition the app sets: for a network it watches itself, and for tests.
///
/// ```swift
/// let network = ConditionSwitch(false)
/// mqtt.onConnectionChange = { network.set($0) }
/// ```
public final class ConditionSwitch: DeferredTaskCondition {
    private let value: Locked<Bool>
    private let broadcast = Broadcast<Bool>(bufferSize: 16)

    public init(_ isSatisfied: Bool) {
        value = Locked(isSatisfied)
    }

    deinit {
        broadcast.finish()
    }

    public var isSatisfied: Bool { value.withLock { $0 } }

    /// Sets the condition; a change is told to every stream.
    public func set(_ isSatisfied: Bool) {
        let changed = value.withLock { value in
            defer { value = isSatisfied }
            return value != isSatisfied
        }
        if changed { broadcast.publish(isSatisfied) }
    }

    public func changes() -> AsyncStream<Bool> {
        broadcast.subscribe()
    }
}

/// External power, as a ``PowerSource`` tells it: satisfied in ``PowerState/normal`` (on mains, and no power-saver
/// profile asks for restraint), not in low power or critical.
public struct ExternalPowerCondition: DeferredTaskCondition {
    public let source: any PowerSource

    public init(_ source: any PowerSource) {
        self.source = source
    }

    public var isSatisfied: Bool { source.state == .normal }

    public func changes() -> AsyncStream<Bool> {
        let states = source.updates()
        return AsyncStream { continuation in
            let task = Task {
                for await state in states { continuation.yield(state == .normal) }
                continuation.finish()
            }
            continuation.onTermination = { _ in task.cancel() }
        }
    }
}
