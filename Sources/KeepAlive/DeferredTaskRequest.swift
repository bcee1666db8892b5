/// A request to run a registered deferred task once: not before ``earliestBegin``, only while its conditions hold,
/// in a ledger window of ``budget`` — `BGAppRefreshTaskRequest` and `BGProcessingTaskRequest` of iOS's
/// `BGTaskScheduler`, as one value with a ``kind``.
///
/// ```swift
/// var request = DeferredTaskRequest(identifier: "history.fern", kind: .processing)
/// request.earliestBegin = scheduler.now + .seconds(3_600)   // Date(timeIntervalSinceNow: 3600)
/// request.requiresNetwork = true                           // requiresNetworkConnectivity
/// request.requiresExternalPower = true
/// try scheduler.submit(request)
/// ```
public struct DeferredTaskRequest: Sendable, Hashable {
    /// What the work weighs, as iOS tells its two task types apart.
    public enum Kind: String, Sendable, Hashable, CaseIterable {
        /// Light and quick (`BGAppRefreshTask`): a budget of at most 30 s (the default), no power condition.
        case refresh
        /// Heavy (`BGProcessingTask`): many reads on one link, a download; a budget of up to an hour (10 minutes by
        /// default), may require external power. One runs at a time (``DeferredTaskScheduler/Configuration``).
        case processing

        /// The budget a request of this kind gets when it names none.
        public var defaultBudget: Duration {
            switch self {
            case .refresh: .seconds(30)
            case .processing: .seconds(600)
            }
        }

        /// The longest budget a request of this kind may ask for.
        public var maximumBudget: Duration {
            switch self {
            case .refresh: .seconds(30)
            case .processing: .seconds(3_600)
            }
        }
    }

    /// The handler's identifier (``DeferredTaskScheduler/register(_:kind:handler:)``). A second request for one
    /// identifier replaces the first, as on iOS.
    public var identifier: String
    public var kind: Kind
    /// Not before this instant of the scheduler's clock (``DeferredTaskScheduler/now``); `nil`: as soon as the
    /// conditions hold.
    public var earliestBegin: KeepAliveInstant?
    /// Only while the app's network condition holds (the daemon's: connected to its MQTT broker).
    public var requiresNetwork: Bool
    /// Only on external power: the scheduler's ``PowerSource`` says ``PowerState/normal``. Processing only.
    public var requiresExternalPower: Bool
    /// The window the handler runs in: at its end the handler's task is cancelled and its expiration handler
    /// runs; the ledger's grace later, the window is force-ended.
    public var budget: Duration
    /// The device the work connects to, if any: the run holds it in the scheduler's ``DeviceGate`` (the one the
    /// polls use), so a device never gets two links at once.
    public var device: String?

    public init(
        identifier: String, kind: Kind, earliestBegin: KeepAliveInstant? = nil, requiresNetwork: Bool = false,
        requiresExternalPower: Bool = false, budget: Duration? = nil, device: String? = nil
    ) {
        self.identifier = identifier
        self.kind = kind
        self.earliestBegin = earliestBegin
        self.requiresNetwork = requiresNetwork
        self.requiresExternalPower = requiresExternalPower
        self.budget = budget ?? kind.defaultBudget
        self.device = device
    }

    /// Checks what a submission needs; the error names the field and the identifier.
    public func validate() throws(ConfigurationValueError) {
        let field = "DeferredTaskRequest(\(identifier))"
        guard !identifier.isEmpty else {
            throw ConfigurationValueError(field: "DeferredTaskRequest.identifier", reason: "must not be empty")
        }
        guard budget > .zero, budget <= kind.maximumBudget else {
            throw ConfigurationValueError(
                field: field + ".budget",
                reason: "must be more than 0 and at most \(kind.maximumBudget.compact) for a \(kind) task, "
                    + "not \(budget.compact)")
        }
        if requiresExternalPower, kind == .refresh {
            throw ConfigurationValueError(
                field: field + ".requiresExternalPower",
                reason: "only a processing task may require external power (a refresh is light)")
        }
        if let device, device.isEmpty {
            throw ConfigurationValueError(field: field + ".device", reason: "must not be empty when given")
        }
    }
}

/// Why a deferred task was not accepted, or did not succeed.
public struct DeferredTaskError: Error, Sendable, Hashable, CustomStringConvertible {
    public enum Code: String, Sendable, Hashable {
        /// No handler is registered for the identifier (iOS: `notPermitted`).
        case unregistered
        /// A handler is already registered for the identifier.
        case alreadyRegistered
        /// The request cannot work (``DeferredTaskRequest/validate()``).
        case invalid
        /// The window's budget ran out before the handler finished.
        case expired
        /// The handler ignored its expiry past the ledger's grace: the window was force-ended.
        case forcedEnd
        /// The handler said so (``DeferredTask/setTaskCompleted(success:)``) or threw.
        case failed
    }

    public var code: Code
    public var identifier: String
    public var message: String

    public init(_ code: Code, identifier: String, _ message: String) {
        self.code = code
        self.identifier = identifier
        self.message = message
    }

    public var description: String { "deferred task '\(identifier)': \(code): \(message)" }
}
