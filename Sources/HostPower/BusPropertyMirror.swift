import DBus
import KeepAlive
import Basics
import Logging

/// One D-Bus object whose properties a source mirrors.
struct WatchedObject: Hashable, Sendable {
    var service: String
    var path: ObjectPath
    var interface: String
}

/// What a ``BusPropertyMirror`` knows: the properties of the watched objects of the services on the bus.
struct BusSnapshot: Sendable {
    var properties: [WatchedObject: [String: DBusValue]] = [:]
    var presentServices: Set<String> = []
    var syncCount = 0

    /// The property's value, variants unwrapped; nil when the object or the property is not known.
    func value(_ name: String, of object: WatchedObject) -> DBusValue? {
        properties[object]?[name]?.unwrappingVariants
    }
}

/// What a source makes of a snapshot: the state, and the reason in words (for the log and `summary`).
struct PowerVerdict: Sendable, Hashable {
    var state: PowerState
    var reason: String
}

/// The D-Bus side shared by the UPower and power-profiles sources: a local copy of a few objects' properties,
/// read with `GetAll` and kept current by `PropertiesChanged` from the services' current owners, following the
/// services leaving and returning through `NameOwnerChanged`.
///
/// Everything happens in `run()`, in one loop over one stream of events in bus order: the signal handlers only
/// enqueue. A `GetAll` awaited in the loop therefore sees the signals that arrive meanwhile applied after its
/// snapshot, in order, so a snapshot never overwrites a newer change (BlueZObjectCache buffers for the same
/// reason). Every call is bounded by `callTimeout`.
final class BusPropertyMirror: Sendable {
    enum Event: Sendable {
        case owner(service: String, newOwner: String?)
        case changed(WatchedObject, [DBusValue])
        case connectionLost(DBusError)
    }

    static let propertiesInterface = "org.freedesktop.DBus.Properties"

    let connection: DBusConnection
    /// The backend's name for people: `UPower`, `power-profiles-daemon`.
    let name: String
    let objects: [WatchedObject]
    /// The bus names of `objects`, in order, once each.
    let services: [String]
    let callTimeout: Duration
    let logger: Logger
    let judge: @Sendable (BusSnapshot) -> PowerVerdict
    let cell = PowerStateCell()
    private let snapshot = Locked(BusSnapshot())
    private let verdict: Locked<PowerVerdict?> = Locked(nil)

    init(
        connection: DBusConnection, name: String, objects: [WatchedObject], callTimeout: Duration, logger: Logger,
        judge: @escaping @Sendable (BusSnapshot) -> PowerVerdict
    ) {
        self.connection = connection
        self.name = name
        self.objects = objects
        var services: [String] = []
        for object in objects where !services.contains(object.service) { services.append(object.service) }
        self.services = services
        self.callTimeout = callTimeout
        self.logger = logger
        self.judge = judge
    }

    /// The last verdict's reason, or why there is none yet.
    var summary: String {
        verdict.withLock { $0?.reason } ?? "\(name): not read yet"
    }

    var syncCount: Int {
        snapshot.withLock { $0.syncCount }
    }

    var presentServices: Set<String> {
        snapshot.withLock { $0.presentServices }
    }

    /// Mirrors the services until the task is cancelled (returns) or the connection is lost (throws, after
    /// falling back to `.normal`).
    func run() async throws {
        let (events, continuation) = AsyncStream<Event>.makeStream()
        var tokens: [SignalHandlerToken] = []
        defer {
            for token in tokens { connection.removeSignalHandler(token) }
            continuation.finish()
        }
        let onEnd: @Sendable (any Error) -> Void = { error in
            continuation.yield(
                .connectionLost(error as? DBusError ?? DBusError(code: .disconnected, message: "\(error)")))
        }
        do {
            for service in services {
                let rule = MatchRule(
                    sender: "org.freedesktop.DBus", path: "/org/freedesktop/DBus", interface: "org.freedesktop.DBus",
                    member: "NameOwnerChanged", arg0: service)
                let token = try await connection.addSignalHandler(
                    matching: rule,
                    { signal in
                        guard let (_, _, owner) = try? signal.arguments.decode(String.self, String.self, String.self)
                        else { return }
                        continuation.yield(.owner(service: service, newOwner: owner.isEmpty ? nil : owner))
                    },
                    onEnd: onEnd)
                tokens.append(token)
            }
            for object in objects {
                // A well-known sender: the connection delivers only what its current owner emits.
                let rule = MatchRule(
                    sender: object.service, path: object.path, interface: Self.propertiesInterface,
                    member: "PropertiesChanged", arg0: object.interface)
                let token = try await connection.addSignalHandler(
                    matching: rule, { continuation.yield(.changed(object, $0.arguments)) }, onEnd: onEnd)
                tokens.append(token)
            }
        } catch {
            fallBack("could not subscribe to \(name)'s signals: power state normal", reason: "\(error)")
            throw error
        }
        for service in services { await synchronize(service) }
        if presentServices.isEmpty {
            logger.info(
                "\(name) is not on the bus: power state normal until it appears",
                metadata: ["bus_names": "\(services.joined(separator: ", "))"])
        }
        publish()
        for await event in events {
            switch event {
            case .owner(let service, let owner?):
                logger.info(
                    "\(name) is on the bus; reading its state",
                    metadata: ["bus_name": "\(service)", "owner": "\(owner)"])
                await synchronize(service)
            case .owner(let service, nil):
                serviceLeft(service)
            case .changed(let object, let arguments):
                await apply(arguments, to: object)
            case .connectionLost(let error):
                fallBack("lost the bus connection: \(name) no longer followed, power state normal", reason: "\(error)")
                throw error
            }
            publish()
        }
    }

    /// Reads every watched object of `service` (a snapshot replacing what was known).
    private func synchronize(_ service: String) async {
        var fetched: [WatchedObject: [String: DBusValue]] = [:]
        var absent = false
        for object in objects where object.service == service {
            do {
                fetched[object] = try await connection.getAllProperties(
                    interface: object.interface, destination: service, path: object.path, timeout: callTimeout)
            } catch let error as DBusError where Self.meansAbsent(error) {
                absent = true
                break
            } catch {
                if Task.isCancelled { return }
                logger.warning(
                    "could not read the properties of \(name)",
                    metadata: [
                        "bus_name": "\(service)", "path": "\(object.path)", "interface": "\(object.interface)",
                        "error": "\(error)",
                    ])
            }
        }
        snapshot.withLock { snapshot in
            for object in objects where object.service == service {
                snapshot.properties[object] = absent ? nil : fetched[object]
            }
            if absent {
                snapshot.presentServices.remove(service)
            } else {
                snapshot.presentServices.insert(service)
                snapshot.syncCount += 1
            }
        }
    }

    /// True for the errors of a name nobody owns (and that cannot be activated).
    private static func meansAbsent(_ error: DBusError) -> Bool {
        guard let name = error.name else { return false }
        return name == DBusError.StandardName.serviceUnknown || name == DBusError.StandardName.nameHasNoOwner
            || name.hasPrefix("org.freedesktop.DBus.Error.Spawn.")
    }

    private func apply(_ arguments: [DBusValue], to object: WatchedObject) async {
        guard
            let (_, changed, invalidated) = try? arguments.decode(String.self, [String: DBusValue].self, [String].self)
        else {
            logger.warning(
                "ignoring a malformed PropertiesChanged from \(name)",
                metadata: ["path": "\(object.path)", "signature": "\(arguments.signature)"])
            return
        }
        let known = snapshot.withLock { snapshot in
            // Unknown service: the NameOwnerChanged before this signal already queued a full read.
            guard snapshot.presentServices.contains(object.service) else { return false }
            for (property, value) in changed { snapshot.properties[object, default: [:]][property] = value }
            return true
        }
        // Invalidated properties carry no value: read the object again.
        if known, !invalidated.isEmpty { await synchronize(object.service) }
    }

    private func serviceLeft(_ service: String) {
        let (wasPresent, nonePresent) = snapshot.withLock { snapshot in
            for object in objects where object.service == service { snapshot.properties[object] = nil }
            return (snapshot.presentServices.remove(service) != nil, snapshot.presentServices.isEmpty)
        }
        guard wasPresent else { return }
        logger.warning(
            nonePresent ? "\(name) left the bus: power state normal until it returns" : "\(name) left the bus",
            metadata: ["bus_name": "\(service)"])
    }

    /// Forgets everything and publishes `.normal`: `run()` is about to throw.
    private func fallBack(_ message: Logger.Message, reason: String) {
        snapshot.withLock { snapshot in
            snapshot.properties = [:]
            snapshot.presentServices = []
        }
        logger.error(message, metadata: ["reason": "\(reason)"])
        publish()
    }

    /// Judges the snapshot, stores the verdict and tells subscribers when the state changed.
    private func publish() {
        let current = snapshot.withLock { snapshot in
            snapshot.presentServices.isEmpty
                ? PowerVerdict(state: .normal, reason: "\(name): not on the bus") : judge(snapshot)
        }
        let previous = verdict.withLock { verdict in
            defer { verdict = current }
            return verdict
        }
        if cell.set(current.state) || previous == nil {
            logger.info(
                "power state \(current.state.rawValue)", metadata: ["source": "\(name)", "reason": "\(current.reason)"])
        }
    }
}
