public import Logging
import Locking
import Readings

/// Polls peripherals on the scheduler's ticks: each due device, in its own ledger window, is connected,
/// written, read and listened to, then always disconnected; each tick yields exactly one ``PollRecord`` per
/// device.
///
/// At most `maxConnections` links per adapter are up at once, handed out fairly. Transient errors are retried
/// inside the window with growing delays; permanent errors are not.
///
/// ```swift
/// let keepAlive = KeepAlive(configuration: .init(interval: .seconds(30)))
/// let engine = PollEngine(peripherals: specs, transport: transport, keepAlive: keepAlive)
/// Task { for await record in engine.records() { print(record.device, record.result) } }
/// try await keepAlive.run()
/// ```
public final class PollEngine: Sendable {
    public struct Configuration: Sendable {
        /// Simultaneous connections per adapter (default 3).
        public var maxConnections: Int
        public var retry: RetryPolicy
        /// Upper bound for one connect attempt (also bounded by the window).
        public var connectTimeout: Duration
        /// Disconnect's own deadline: it runs even after expiry or cancellation.
        public var disconnectTimeout: Duration
        /// Poll each device this many ticks, then stop scheduling it (`nil`: forever).
        public var maxTicks: UInt64?
        /// Calls `onRecord` on the thread that finished the poll (the transport's own executor, a D-Bus
        /// connection's thread) instead of from a new task on the default executor. That saves a task and a
        /// thread switch per poll, but every other poll on that thread waits while `onRecord` runs: set it only
        /// when `onRecord` never blocks (it writes to a regular file, say, not to a pipe or over the network).
        public var recordsOnTransportExecutor: Bool

        public init(
            maxConnections: Int = 3,
            retry: RetryPolicy = .standard,
            connectTimeout: Duration = .seconds(10),
            disconnectTimeout: Duration = .seconds(3),
            maxTicks: UInt64? = nil,
            recordsOnTransportExecutor: Bool = false
        ) {
            self.maxConnections = maxConnections
            self.retry = retry
            self.connectTimeout = connectTimeout
            self.disconnectTimeout = disconnectTimeout
            self.maxTicks = maxTicks
            self.recordsOnTransportExecutor = recordsOnTransportExecutor
        }

        /// At least one connection per adapter, positive timeouts, a valid retry policy.
        public func validate() throws(ConfigurationValueError) {
            let field = "PollEngine.Configuration"
            guard maxConnections >= 1 else {
                throw ConfigurationValueError(field: "\(field).maxConnections", reason: "must be at least 1, not \(maxConnections)")
            }
            guard connectTimeout > .zero else {
                throw ConfigurationValueError(field: "\(field).connectTimeout", reason: "must be positive, not \(connectTimeout.compact)")
            }
            guard disconnectTimeout > .zero else {
                throw ConfigurationValueError(
                    field: "\(field).disconnectTimeout", reason: "must be positive, not \(disconnectTimeout.compact)"
                )
            }
            try retry.validate(field: "\(field).retry")
        }
    }

    public let configuration: Configuration
    public let peripherals: [PeripheralSpec]
    let transport: any PeripheralTransport
    let keepAlive: KeepAlive
    let logger: Logger
    let limiter: ConnectionLimiter
    let broadcast = Broadcast<PollRecord>(bufferSize: 65_536)
    /// Called synchronously with every record, before the streams see it: the lossless path for sinks that
    /// must not drop one (the daemon's output).
    let onRecord: (@Sendable (PollRecord) -> Void)?
    /// Asked before each poll whether it is this engine's (a fleet of gateways); nil: every poll is.
    let admission: (any PollAdmission)?
    /// Per device: what the poll in progress has gathered, and the last values (for newData/noData).
    let scratch: [String: PollScratch]
    /// One poll of a device at a time, scheduled or on command.
    let gate = DeviceGate()
    /// Registration tokens by device name, for commands that name a device.
    var tokensByName: [String: RegistrationToken] {
        Dictionary(uniqueKeysWithValues: zip(peripherals.map(\.name), tokens.withLock { $0 }))
    }
    let tokens: Locked<[RegistrationToken]>
    /// Disconnects still running after their window gave up on them (by device name): the next poll of that
    /// device waits for its own, and the connection slot stays taken until it is done.
    let teardowns = Locked<(running: [String: Teardown], nextID: UInt64)>(([:], 0))

    /// A disconnect running in a task of its own, and its end as a promise the task completes last: waited for
    /// unless cancelled by the next poll, to the end by a slot's release and the engine's shutdown.
    struct Teardown {
        let id: UInt64
        let done: Promise<Void>
    }

    /// Registers one keep-alive callback per peripheral on `keepAlive`; they poll while it runs.
    ///
    /// `onRecord` sees every record synchronously, in completion order, and must return quickly; the
    /// ``records()`` streams keep the newest 65,536 for a slow reader instead. `admission`, when given, is asked
    /// before every poll (see ``PollAdmission``).
    public init(
        peripherals: [PeripheralSpec],
        transport: any PeripheralTransport,
        keepAlive: KeepAlive,
        configuration: Configuration = Configuration(),
        logger: Logger = Logger(label: "keepalive.poll"),
        admission: (any PollAdmission)? = nil,
        onRecord: (@Sendable (PollRecord) -> Void)? = nil
    ) throws(ConfigurationValueError) {
        try configuration.validate()
        var firstIndex: [String: Int] = [:]
        for (index, spec) in peripherals.enumerated() {
            if let first = firstIndex[spec.name] {
                throw ConfigurationValueError(
                    field: "PollEngine.peripherals[\(index)].name",
                    reason: "'\(spec.name)' is already the name of peripherals[\(first)]: names identify records and must be unique"
                )
            }
            firstIndex[spec.name] = index
            try KeepAlive.RegistrationOptions(interval: spec.interval, budget: spec.budget)
                .validate(against: keepAlive.configuration)
        }
        self.onRecord = onRecord
        self.admission = admission
        self.configuration = configuration
        self.peripherals = peripherals
        self.transport = transport
        self.keepAlive = keepAlive
        self.logger = logger
        self.limiter = ConnectionLimiter(maxPerAdapter: configuration.maxConnections)
        self.scratch = Dictionary(uniqueKeysWithValues: peripherals.map { ($0.name, PollScratch(spec: $0)) })
        self.tokens = Locked([])
        var tokens: [RegistrationToken] = []
        for spec in peripherals {
            let scratch = self.scratch[spec.name]!
            tokens.append(
                try keepAlive.register(
                    name: spec.name,
                    options: KeepAlive.RegistrationOptions(
                        interval: spec.interval,
                        budget: spec.budget,
                        maxTicks: configuration.maxTicks
                    ),
                    // Each closure and the gate hold the device's scratch, which holds its spec: a spec captured
                    // by value was a copy in each of the three (4.8 MiB at 10,000 devices, Benchmarks/NOTES.md).
                    gate: SlotGate(engine: self, scratch: scratch),
                    onReport: { [weak self] report in self?.record(report, scratch: scratch) },
                    handler: { [weak self] window in
                        guard let self else { return .failed(CancellationError()) }
                        return await withTaskExecutorPreference(self.transport.preferredExecutor) {
                            await self.pollAdmitted(in: window, scratch: scratch)
                        }
                    }
                )
            )
        }
        self.tokens.withLock { $0 = tokens }
    }

    /// Unregisters every device from the scheduler.
    public func detach() {
        for token in tokens.withLock({ $0 }) { keepAlive.unregister(token) }
        tokens.withLock { $0 = [] }
    }

    /// Every record from now on, in completion order.
    public func records() -> AsyncStream<PollRecord> {
        broadcast.subscribe()
    }

    /// Returns once every disconnect a cancelled or expired window left running has finished (each is bounded
    /// by `disconnectTimeout`). Call it after the scheduler stops and before closing the transport.
    public func waitUntilDisconnected() async {
        while let pending = teardowns.withLock({ $0.running.values.first?.done }) {
            _ = try? await pending.value()
        }
    }

    /// The most connections ever up at once on `adapter`.
    public func maxSimultaneousConnections(adapter: String) -> Int {
        limiter.highWater(adapter: adapter)
    }

    // MARK: One device, one window

    /// A poll outside the grid (a command): the admission, a connection slot (waited for in this task), then
    /// ``pollAdmitted(in:scratch:)``. Scheduled polls wait for their slot before their task exists
    /// (``SlotGate``); both take the slot before the device's gate, so neither can hold what the other waits for.
    /// The device is the scratch's.
    func poll(in window: PollWindow, scratch: PollScratch) async -> PollResult {
        scratch.begin(tick: window.tick)
        guard let admitted = admit(scratch) else { return .noData }
        let adapter = admitted.peripheral.adapter
        do {
            try await limiter.acquire(adapter: adapter, key: admitted.name)
        } catch {
            return Self.slotWaitEnded(adapter: adapter, scratch: scratch)
        }
        return await pollAdmitted(in: window, scratch: scratch)
    }

    /// Asks the admission about this poll: the spec to poll (on the holder's adapter for a shared device), or
    /// `nil` when another gateway holds the device.
    private func admit(_ scratch: PollScratch) -> PeripheralSpec? {
        let spec = scratch.spec
        guard let admission else { return spec }
        switch admission.admit(spec.name) {
        case .decline:
            scratch.decline()
            return nil
        case .poll(let holder):
            scratch.setHolder(holder)
            var spec = spec
            if let holder { spec.peripheral.adapter = holder.adapter }
            return spec
        }
    }

    /// A scheduled poll's way in, before its task exists: the admission, then a place in the adapter's queue.
    /// `start` runs the poll's task once the slot is its own (at once if one is free); a declined poll starts at
    /// once and writes no record.
    func requestSlot(in window: PollWindow, scratch: PollScratch, start: @escaping @Sendable () -> Void) -> LaunchRequest {
        scratch.begin(tick: window.tick)
        guard let admitted = admit(scratch) else {
            start()
            return .started
        }
        let adapter = admitted.peripheral.adapter
        guard let ticket = limiter.request(adapter: adapter, key: admitted.name, granted: start) else {
            start()
            return .started
        }
        return LaunchRequest { [limiter] in
            guard limiter.withdraw(ticket) else { return nil }
            return Self.slotWaitEnded(adapter: adapter, scratch: scratch)
        }
    }

    private static func slotWaitEnded(adapter: String, scratch: PollScratch) -> PollResult {
        let failure = TransportError(.timeout, "window ended while waiting for a connection slot on \(adapter)")
        scratch.fail(failure)
        return .failed(failure)
    }

    /// The poll once admitted and holding its connection slot, which it gives back at the end: the device's
    /// gate (one poll of a device at a time), the previous poll's disconnect, then the attempts.
    func pollAdmitted(in window: PollWindow, scratch: PollScratch) async -> PollResult {
        let admission = scratch.admission
        if admission.declined { return .noData }
        var spec = scratch.spec
        if let holder = admission.holder { spec.peripheral.adapter = holder.adapter }
        defer { releaseSlot(adapter: spec.peripheral.adapter, device: spec.name) }
        do {
            try await gate.enter(spec.name)
        } catch {
            let failure = TransportError(.timeout, "window ended while another poll of this device (a command's) was running")
            scratch.fail(failure)
            return .failed(failure)
        }
        defer { gate.leave(spec.name) }
        if let previous = teardowns.withLock({ $0.running[spec.name]?.done }) {
            // The last window's disconnect is still running: never connect over it.
            _ = await previous.valueUnlessCancelled()
            if Task.isCancelled {
                let failure = TransportError(.timeout, "window ended while the previous poll's disconnect was still running")
                scratch.fail(failure)
                return .failed(failure)
            }
        }
        return await attempts(spec, in: window, scratch: scratch)
    }

    /// The attempts of one window, once it holds a connection slot. Kept out of line: an async function's frame
    /// holds everything its inlined callees keep across a suspension, and the frames of the callers are
    /// allocated while a poll waits for the device's gate or a command waits for its slot.
    @inline(never)
    private func attempts(_ spec: PeripheralSpec, in window: PollWindow, scratch: PollScratch) async -> PollResult {
        let peripheral = spec.peripheral
        var attempt = 0
        while true {
            attempt += 1
            scratch.setAttempts(attempt)
            do {
                try await pollOnce(spec, window: window, scratch: scratch)
                return scratch.finishSuccess() ? .newData : .noData
            } catch {
                let failure = Self.transportError(error)
                scratch.fail(failure)
                let context: Logger.Metadata = [
                    "device": "\(spec.name)", "address": "\(peripheral.address)", "attempt": "\(attempt)",
                    "error": "\(failure)",
                ]
                // A zombie link is not retried in its window: the record says so, the next poll makes a new link.
                guard failure.isTransient, failure.code != .silentLink, !Task.isCancelled else {
                    logger.warning("poll failed", metadata: context)
                    return .failed(failure)
                }
                guard let delay = configuration.retry.delay(afterAttempt: attempt),
                    window.timeRemaining > delay + configuration.retry.minimumAttemptTime
                else {
                    logger.warning("poll failed; no attempt left in this window", metadata: context)
                    return .failed(failure)
                }
                logger.info("poll failed; retrying", metadata: context.merging(["delay": "\(delay.compact)"]) { $1 })
                do {
                    try await window.time.sleep(for: delay)
                } catch {
                    return .failed(failure)
                }
            }
        }
    }

    /// connect → write → read → listen, then disconnect on every path.
    private func pollOnce(_ spec: PeripheralSpec, window: PollWindow, scratch: PollScratch) async throws {
        let peripheral = spec.peripheral
        scratch.resetAttemptData()
        // The transport's deadline ends a little before the window's (a tenth of what is left, at most 250 ms): a
        // scan that found nothing or a connect that never completed is recorded as what it was (deviceNotFound,
        // timeout), not as the window's expiry. With both at the same instant, which of the two timers fired
        // first decided the record's code (the healing end-to-end test saw either under load).
        let remaining = window.timeRemaining
        let timeout = min(configuration.connectTimeout, remaining - min(remaining / 10, .milliseconds(250)))
        do {
            try await transport.connect(peripheral, options: ConnectOptions(timeout: timeout, characteristics: spec.characteristics))
            for write in spec.writes {
                try await transport.write(write.value, to: write.characteristic, of: peripheral, type: write.type)
            }
            for characteristic in spec.reads {
                let bytes = try await transport.read(characteristic, from: peripheral)
                scratch.add(value: PollRecord.Value(characteristic: characteristic, bytes: bytes))
            }
            await readPresentationFormats(spec, scratch: scratch)
            if !spec.notifications.isEmpty {
                try await listen(spec, window: window, scratch: scratch)
            }
        } catch {
            await disconnect(peripheral, device: spec.name)
            throw error
        }
        await disconnect(peripheral, device: spec.name)
    }

    /// Asks, once per device, for the 0x2904 descriptor of each characteristic it decides the readings of. A
    /// failed read is logged and asked again next poll; it never fails the poll (the value is still recorded,
    /// shown as hex meanwhile).
    private func readPresentationFormats(_ spec: PeripheralSpec, scratch: PollScratch) async {
        for characteristic in spec.presentationCandidates where !scratch.knowsPresentation(of: characteristic) {
            do {
                let bytes = try await transport.presentationFormat(of: characteristic, from: spec.peripheral)
                var format: PresentationFormat?
                if let bytes {
                    do {
                        format = try PresentationFormat(descriptor: bytes)
                    } catch {
                        logger.warning(
                            "0x2904 descriptor not usable, values shown as hex",
                            metadata: ["device": "\(spec.name)", "uuid": "\(characteristic)", "error": "\(error)"]
                        )
                    }
                }
                scratch.setPresentation(format, of: characteristic)
            } catch {
                logger.debug(
                    "0x2904 descriptor not read, asked again next poll",
                    metadata: ["device": "\(spec.name)", "uuid": "\(characteristic)", "error": "\(error)"]
                )
            }
        }
    }

    /// Subscribes to every notifying characteristic and collects values for each one's duration, in parallel.
    private func listen(_ spec: PeripheralSpec, window: PollWindow, scratch: PollScratch) async throws {
        let peripheral = spec.peripheral
        var streams: [(PeripheralSpec.Subscription, AsyncThrowingStream<[UInt8], any Error>)] = []
        for subscription in spec.notifications {
            streams.append((subscription, try await transport.notifications(from: subscription.characteristic, of: peripheral)))
        }
        let time = window.time
        try await withThrowingTaskGroup(of: Void.self) { group in
            for (subscription, stream) in streams {
                group.addTask {
                    try await withThrowingTaskGroup(of: Void.self) { listener in
                        let started = time.now
                        let lastHeard = Locked(started)
                        listener.addTask {
                            for try await bytes in stream {
                                let now = time.now
                                lastHeard.withLock { $0 = now }
                                scratch.add(
                                    notification: PollRecord.Notification(
                                        characteristic: subscription.characteristic,
                                        at: now,
                                        bytes: bytes
                                    )
                                )
                            }
                        }
                        listener.addTask { try await time.sleep(for: subscription.duration) }
                        if let silence = subscription.silence {
                            listener.addTask {
                                try await Self.watchSilence(
                                    of: subscription, bound: silence, lastHeard: lastHeard, until: started + subscription.duration, time: time)
                            }
                        }
                        // Whichever ends first (the duration, or the stream with an error) ends the listening.
                        try await listener.next()
                        listener.cancelAll()
                    }
                }
            }
            try await group.waitForAll()
        }
    }

    /// Disconnects outside the caller's cancellation (a cancelled or expired window must still drop its link),
    /// bounded by the transport's contract and `disconnectTimeout`.
    ///
    /// A live window waits for it. A cancelled one does not: BlueZ takes about 2 s to disconnect, longer than
    /// the ledger's grace, so waiting would turn every expiry into a forced end. The disconnect then finishes
    /// on its own, keeping the device's connection slot until it does (see ``waitUntilDisconnected()``).
    private func disconnect(_ peripheral: Peripheral, device: String) async {
        let transport = self.transport
        let timeout = configuration.disconnectTimeout
        let teardowns = self.teardowns
        // Registered under the lock before the task can finish, and removed by the task itself as it ends: a
        // finished disconnect is never left looking pending.
        let done = Promise<Void>()
        teardowns.withLock { state in
            let id = state.nextID
            state.nextID += 1
            Task(executorPreference: transport.preferredExecutor) {
                await transport.disconnect(peripheral, timeout: timeout)
                teardowns.withLock { state in
                    if state.running[device]?.id == id { state.running[device] = nil }
                }
                done.succeed()
            }
            state.running[device] = Teardown(id: id, done: done)
        }
        _ = await done.valueUnlessCancelled()
    }

    /// Gives the connection slot back, or, while the device's disconnect still runs, once it has finished.
    private func releaseSlot(adapter: String, device: String) {
        guard let pending = teardowns.withLock({ $0.running[device]?.done }) else {
            limiter.release(adapter: adapter)
            return
        }
        let limiter = self.limiter
        Task {
            _ = try? await pending.value()
            limiter.release(adapter: adapter)
        }
    }

    static func transportError(_ error: any Error) -> TransportError {
        switch error {
        case let error as TransportError: error
        case is CancellationError: TransportError(.timeout, "window expired or was cancelled")
        default: TransportError(.failed, String(describing: error))
        }
    }
}

/// A scheduled poll's ``LaunchGate``: ``PollEngine/requestSlot(in:scratch:start:)``.
struct SlotGate: LaunchGate {
    weak let engine: PollEngine?
    let scratch: PollScratch

    var preferredExecutor: (any TaskExecutor)? { engine?.transport.preferredExecutor }
    var reportsOnPreferredExecutor: Bool { engine?.configuration.recordsOnTransportExecutor ?? false }

    func request(_ window: PollWindow, start: @escaping @Sendable () -> Void) -> LaunchRequest {
        guard let engine else {
            start()
            return .started
        }
        return engine.requestSlot(in: window, scratch: scratch, start: start)
    }
}
