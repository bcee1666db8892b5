// Signal subscriptions: one AddMatch per stream, removed when the stream ends; local filtering per stream;
// owners of well-known sender names followed through GetNameOwner and NameOwnerChanged.

/// One signal stream's registration. A class: every signal visits every subscription, and copying the struct
/// (its match rule's strings, two closures) cost a dozen retains and releases per visit.
final class SignalSubscription: Sendable {
    let rule: MatchRule
    let delivery: Delivery
    let finish: @Sendable (any Error) -> Void

    init(rule: MatchRule, delivery: Delivery, finish: @escaping @Sendable (any Error) -> Void) {
        self.rule = rule
        self.delivery = delivery
        self.finish = finish
    }

    enum Delivery: Sendable {
        /// The signal with every argument read (streams and handlers that read generically).
        case decoded(@Sendable (DBusSignal) -> Void)
        /// The signal as it arrived: the handler reads what it needs.
        case received(@Sendable (ReceivedSignal) -> Void)
    }
}

/// Names a signal handler for ``DBusConnection/removeSignalHandler(_:)``.
public final class SignalHandlerToken: @unchecked Sendable {
    // @unchecked Sendable: `id` is written once, on the connection's thread, before the token is returned.
    var id: UInt64 = 0
}

/// The current owner of a well-known name some subscription filters on, shared by those subscriptions.
struct OwnerTracker {
    var owner: String?
    var references: Int
}

extension DBusConnection {
    static let busName = "org.freedesktop.DBus"
    static let busPath: ObjectPath = "/org/freedesktop/DBus"

    /// Subscribes to the signals matching `rule`.
    ///
    /// Returns once the bus has accepted the match rule (`AddMatch` replied), so any matching signal emitted
    /// after this returns is delivered. The match rule is removed (`RemoveMatch`) when the stream ends: when
    /// its consumer stops iterating, the task is cancelled or the stream is dropped. When the connection is
    /// lost or closed the stream ends with `DBusError.Code.disconnected`.
    ///
    /// With a well-known `rule.sender`, delivery is filtered by the sender's *unique* name, resolved with
    /// `GetNameOwner` and followed through `NameOwnerChanged`; `DBusSignal.sender` is always the unique name.
    public func signals(matching rule: MatchRule) async throws -> AsyncThrowingStream<DBusSignal, any Error> {
        let (stream, continuation) = AsyncThrowingStream<DBusSignal, any Error>.makeStream()
        try await subscribe(
            rule,
            .decoded { continuation.yield($0) },
            finish: { continuation.finish(throwing: $0) },
            registered: { id in continuation.onTermination = { [weak self] _ in self?.endSubscriptionSoon(id) } })
        return stream
    }

    /// Calls `handler` for every signal matching `rule`, on the connection's own queue, in arrival order: no
    /// task hop per signal, for consumers that only update state under a lock (an object cache).
    ///
    /// The handler must be quick and must not wait on this connection. `onEnd` runs once if the connection is
    /// lost or closed. Returns once the match rule is in place; ``removeSignalHandler(_:)`` removes it.
    public func addSignalHandler(
        matching rule: MatchRule,
        _ handler: @escaping @Sendable (DBusSignal) -> Void,
        onEnd: @escaping @Sendable (any Error) -> Void
    ) async throws -> SignalHandlerToken {
        let token = SignalHandlerToken()
        try await subscribe(rule, .decoded(handler), finish: onEnd, registered: { token.id = $0 })
        return token
    }

    /// Like ``addSignalHandler(matching:_:onEnd:)``, but the handler gets each signal as it arrived and reads
    /// only what it needs (``ReceivedSignal/propertiesChanged()`` and the other typed readers walk the message
    /// once): an object cache's way to follow a busy service.
    public func addSignalHandler(
        matching rule: MatchRule,
        reading handler: @escaping @Sendable (ReceivedSignal) -> Void,
        onEnd: @escaping @Sendable (any Error) -> Void
    ) async throws -> SignalHandlerToken {
        let token = SignalHandlerToken()
        try await subscribe(rule, .received(handler), finish: onEnd, registered: { token.id = $0 })
        return token
    }

    /// Removes a handler added with ``addSignalHandler(matching:_:onEnd:)`` (and its match rule).
    public nonisolated func removeSignalHandler(_ token: SignalHandlerToken) {
        endSubscriptionSoon(token.id)
    }

    /// Follows the owner of a bus name: one element per `NameOwnerChanged` for `name`, from now on.
    public func nameOwnerChanges(for name: String) async throws -> AsyncThrowingStream<NameOwnerChange, any Error> {
        try Names.checkBusName(name)
        let (stream, continuation) = AsyncThrowingStream<NameOwnerChange, any Error>.makeStream()
        let rule = MatchRule(
            sender: Self.busName, path: Self.busPath, interface: Self.busName, member: "NameOwnerChanged", arg0: name)
        try await subscribe(
            rule,
            .decoded { signal in
                guard let change = NameOwnerChange(signal) else { return }
                continuation.yield(change)
            },
            finish: { continuation.finish(throwing: $0) },
            registered: { id in continuation.onTermination = { [weak self] _ in self?.endSubscriptionSoon(id) } })
        return stream
    }

    private func subscribe(
        _ rule: MatchRule, _ delivery: SignalSubscription.Delivery,
        finish: @escaping @Sendable (any Error) -> Void,
        registered: (UInt64) -> Void
    ) async throws {
        try checkOpen()
        try rule.check()
        let addMatch = try Self.busMethod("AddMatch", [.string(rule.description)])
        let id = nextSubscriptionID
        nextSubscriptionID += 1
        // Everything below is sent in order before the AddMatch for the rule itself, so the owner of a
        // well-known sender is known before the first matching signal can arrive.
        if rule.senderNeedsResolution, let sender = rule.sender { startTrackingOwner(of: sender) }
        subscriptions[id] = SignalSubscription(rule: rule, delivery: delivery, finish: finish)
        registered(id)
        do {
            _ = try await sendWithReply(addMatch, timeout: .seconds(25))
        } catch {
            // The AddMatch may have reached the bus (a cancelled or timed-out wait): take the rule back too (a
            // RemoveMatch for a rule the bus refused costs nothing: it is sent without a reply).
            removeSubscription(id, removeMatch: true)
            throw error
        }
    }

    nonisolated func endSubscriptionSoon(_ id: UInt64) {
        executor.async {
            self.onThread { $0.removeSubscription(id, removeMatch: true) }
        }
    }

    func removeSubscription(_ id: UInt64, removeMatch: Bool) {
        guard let subscription = subscriptions.removeValue(forKey: id) else { return }
        if removeMatch {
            sendWithoutReply(try? Self.busMethod("RemoveMatch", [.string(subscription.rule.description)]))
        }
        if subscription.rule.senderNeedsResolution, let sender = subscription.rule.sender {
            stopTrackingOwner(of: sender)
        }
    }

    // MARK: Owners of well-known names

    private func startTrackingOwner(of name: String) {
        if ownerTrackers[name] != nil {
            ownerTrackers[name]?.references += 1
            return
        }
        ownerTrackers[name] = OwnerTracker(owner: nil, references: 1)
        sendWithoutReply(try? Self.busMethod("AddMatch", [.string(Self.ownerChangedRule(name).description)]))
        guard let query = try? Self.busMethod("GetNameOwner", [.string(name)]) else { return }
        // Completed in arrival order with the NameOwnerChanged signals, so the newest answer wins.
        sendWithReply(query) { connection, result in
            guard connection.ownerTrackers[name] != nil else { return }
            let owner = (try? result.get().arguments())?.first?.string
            connection.ownerTrackers[name]?.owner = owner
        }
    }

    private func stopTrackingOwner(of name: String) {
        guard var tracker = ownerTrackers[name] else { return }
        tracker.references -= 1
        guard tracker.references == 0 else {
            ownerTrackers[name] = tracker
            return
        }
        ownerTrackers[name] = nil
        sendWithoutReply(try? Self.busMethod("RemoveMatch", [.string(Self.ownerChangedRule(name).description)]))
    }

    private static func ownerChangedRule(_ name: String) -> MatchRule {
        MatchRule(sender: busName, path: busPath, interface: busName, member: "NameOwnerChanged", arg0: name)
    }

    // MARK: Delivery

    /// Called on the connection's thread for every incoming signal, in arrival order.
    func deliverSignal(_ message: DBusMessage) {
        statistics.signalsReceived += 1
        guard let path = message.path, let interface = message.interface, let member = message.member else { return }
        let sender = message.sender
        var arguments: [DBusValue]?
        if sender == Self.busName, interface == Self.busName, member == "NameOwnerChanged", !ownerTrackers.isEmpty {
            arguments = try? message.arguments()
            if let change = arguments.flatMap({ NameOwnerChange(arguments: $0) }), ownerTrackers[change.name] != nil {
                ownerTrackers[change.name]?.owner = change.newOwner
            }
        }
        var signal: DBusSignal?
        var firstString: String??
        for subscription in subscriptions.values {
            let owner =
                subscription.rule.senderNeedsResolution
                ? subscription.rule.sender.flatMap { ownerTrackers[$0]?.owner } : nil
            guard
                subscription.rule.matchesHeader(
                    sender: sender, path: path, interface: interface, member: member, owner: owner)
            else { continue }
            if let arg0 = subscription.rule.arg0 {
                if firstString == nil {
                    firstString = .some(arguments.map { $0.first?.string } ?? message.firstStringArgument)
                }
                guard firstString! == arg0 else { continue }
            }
            switch subscription.delivery {
            case .received(let handler):
                handler(
                    ReceivedSignal(sender: sender, path: path, interface: interface, member: member, message: message))
            case .decoded(let deliver):
                if signal == nil {
                    // A signal we cannot read (libdbus could not duplicate one of its Unix fds) is dropped rather
                    // than delivered half.
                    guard let values = arguments ?? (try? message.arguments()) else { return }
                    arguments = values
                    signal = DBusSignal(
                        sender: sender, destination: message.destination, path: path, interface: interface,
                        member: member, arguments: values)
                }
                deliver(signal!)
            }
        }
    }

    // MARK: Messages to the bus itself

    static func busMethod(_ method: String, _ arguments: [DBusValue]) throws -> DBusMessage {
        let message = try DBusMessage.methodCall(
            destination: busName, path: busPath, interface: busName, member: method)
        try message.appendArguments(arguments)
        return message
    }

    /// Sends a bus method whose reply nobody waits for (the no-reply flag spares the bus from answering).
    func sendWithoutReply(_ message: DBusMessage?) {
        guard state == .open, let message else { return }
        message.setNoReply()
        try? sendNow(message)
    }
}

extension NameOwnerChange {
    init?(_ signal: DBusSignal) {
        self.init(arguments: signal.arguments)
    }

    init?(arguments: [DBusValue]) {
        guard let (name, old, new) = try? arguments.decode(String.self, String.self, String.self) else { return nil }
        self.init(name: name, oldOwner: old.isEmpty ? nil : old, newOwner: new.isEmpty ? nil : new)
    }
}
