public import CoreMetrics
public import KeepAlive
public import Logging
import Basics
public import Readings

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
        /// Disconnect's own deadline: it runs even after expiry or cancellation. bluetoothd 5.66 drops a link when a
        /// 2-s timer in whole seconds fires, 1.8–2.8 s after `Disconnect`: the default 4 s leaves a loaded host
        /// room, so the link's end is seen and its time (``PollRecord/link``) known.
        public var disconnectTimeout: Duration
        /// Poll each device this many ticks, then stop scheduling it (`nil`: forever).
        public var maxTicks: UInt64?
        /// Calls `onRecord` on the thread that finished the poll (the transport's own executor, a D-Bus
        /// connection's thread) instead of from a new task on the default executor. That saves a task and a
        /// thread switch per poll, but every other poll on that thread waits while `onRecord` runs: set it only
        /// when `onRecord` never blocks (it writes to a regular file, say, not to a pipe or over the network).
        public var recordsOnTransportExecutor: Bool
        /// Slot-aware placement (default on): each device's grid gets a phase that keeps the links of an adapter's
        /// devices within `maxConnections`, learned from how long their polls hold a slot (`SlotPlanner`). Off:
        /// every grid runs from the start, and devices whose ticks coincide wait for slots.
        public var placement: Bool
        /// Opens encrypted advertisements (BTHome, MiBeacon) of devices with a key: `LibCryptoAESCCM()` from the
        /// LibCrypto module. `nil`: such advertisements are refused with `decryptionUnavailable`.
        public var advertisementCipher: (any AESCCM)?
        /// Where the engine's metrics go (polls by result and code, phases, waits, links: `PollMetrics`). The
        /// default is swift-metrics' global factory, so an app that bootstrapped one gets them; a program that runs
        /// several engines gives each its own.
        public var metricsFactory: any MetricsFactory

        public init(
            maxConnections: Int = 3,
            retry: RetryPolicy = .standard,
            connectTimeout: Duration = .seconds(10),
            disconnectTimeout: Duration = .seconds(4),
            maxTicks: UInt64? = nil,
            recordsOnTransportExecutor: Bool = false,
            placement: Bool = true,
            advertisementCipher: (any AESCCM)? = nil,
            metricsFactory: any MetricsFactory = MetricsSystem.factory
        ) {
            self.metricsFactory = metricsFactory
            self.placement = placement
            self.advertisementCipher = advertisementCipher
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
                throw ConfigurationValueError(
                    field: "\(field).maxConnections", reason: "must be at least 1, not \(maxConnections)")
            }
            guard connectTimeout > .zero else {
                throw ConfigurationValueError(
                    field: "\(field).connectTimeout", reason: "must be positive, not \(connectTimeout.compact)")
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
    /// Per device: what the engine remembers between its polls (never what a poll in progress gathers).
    let devices: [String: PolledDevice]
    /// One piece of work on a device at a time (`DeviceGate`, module KeepAlive): its scheduled polls, command
    /// polls and deferred tasks (`DeferredTaskScheduler`) share this one.
    public let gate = DeviceGate()
    /// Where each device polls in its interval, so that the devices of an adapter keep within its slots.
    let placement: SlotPlacement
    /// The advertisements of passive sensors and of polls gated on hearing a device; `nil` when none listens.
    let listener: AdvertisementListener?
    /// The handles the engine reports its metrics through, made once.
    let metrics: PollMetrics
    /// A device's registration token, for commands and status requests that name a device: a lookup, with no
    /// dictionary built per call (status asks at every backoff record).
    func token(of device: String) -> RegistrationToken? {
        guard let index = peripheralIndex[device] else { return nil }
        return tokens.withLock { index < $0.count ? $0[index] : nil }
    }

    /// Each device's place in ``peripherals`` (and so in `tokens`), the first of a name.
    let peripheralIndex: [String: Int]
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
                    reason:
                        """
                        '\(spec.name)' is already the name of peripherals[\(first)]: names identify records and \
                        must be unique
                        """
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
        self.metrics = PollMetrics(factory: configuration.metricsFactory, peripherals: peripherals)
        self.placement = SlotPlacement(
            slots: configuration.maxConnections, jitter: keepAlive.configuration.jitter, logger: logger)
        let listener = AdvertisementListener(
            specs: peripherals, transport: transport,
            decoder: AdvertisementDecoder(cipher: configuration.advertisementCipher), time: keepAlive.time,
            logger: logger)
        self.listener = listener.isEmpty ? nil : listener
        let devices = peripherals.map(PolledDevice.init(spec:))
        self.devices = Dictionary(uniqueKeysWithValues: devices.map { ($0.spec.name, $0) })
        self.tokens = Locked([])
        var peripheralIndex: [String: Int] = [:]
        for (index, spec) in peripherals.enumerated() where peripheralIndex[spec.name] == nil {
            peripheralIndex[spec.name] = index
        }
        self.peripheralIndex = peripheralIndex
        var tokens: [RegistrationToken] = []
        for device in devices {
            let spec = device.spec
            tokens.append(
                try keepAlive.register(
                    name: spec.name,
                    options: KeepAlive.RegistrationOptions(
                        interval: spec.interval,
                        budget: spec.budget,
                        maxTicks: configuration.maxTicks
                    ),
                    // The gate and the report hold the device, which holds its spec: a spec captured by value was
                    // a copy in each closure.
                    gate: SlotGate(engine: self, device: device),
                    onReport: { [weak self] report in self?.record(report, device: device) }
                )
            )
        }
        self.tokens.withLock { $0 = tokens }
        let power = keepAlive.powerState
        // Passive sensors hold no connection slot: placement leaves them out.
        for (device, token) in zip(devices, tokens) where !device.spec.isPassive {
            let spec = device.spec
            let base = spec.interval ?? keepAlive.configuration.interval
            placement.add(
                key: spec.name, token: token, adapter: spec.peripheral.adapter,
                interval: keepAlive.configuration.lowPower.effectiveInterval(base, in: power) ?? base,
                budget: spec.budget ?? keepAlive.configuration.budget(forInterval: base))
        }
        if configuration.placement { keepAlive.align(placement.replanIfDue(at: keepAlive.time.now)) }
    }

    /// Unregisters every device from the scheduler, and stops listening to advertisements.
    public func detach() {
        for token in tokens.withLock({ $0 }) { keepAlive.unregister(token) }
        tokens.withLock { $0 = [] }
        stopListening()
    }

    /// Stops listening to advertisements (the discoveries end); ticks after it find passive sensors `notHeard`.
    public func stopListening() {
        listener?.stop()
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

    /// Where placement put each device in its interval (``SlotPlanner``), measured from the scheduler's start; a
    /// device not placed yet is absent.
    package var placementPhases: [String: Duration] {
        placement.phases()
    }

    // MARK: One device, one window

    /// Who polls a device this time, as the admission decided: the spec (on the holder's adapter for a shared
    /// device) and the holder the record names.
    struct Admitted: Sendable {
        var spec: PeripheralSpec
        var holder: PollRecord.Holder?
        /// How long the poll waited for its connection slot, once it has one.
        var slotWait: Duration?
        /// When the slot became the poll's.
        var granted: KeepAliveInstant?
        /// For a poll gated on hearing the device: what was heard.
        var heard: PollRecord.Heard?

        /// An outcome that carries the admission's decision and the slot wait, before any attempt.
        func outcome(_ result: PollResult) -> PollOutcome {
            var outcome = PollOutcome(result: result)
            outcome.holder = holder
            outcome.slotWait = slotWait
            outcome.heard = heard
            return outcome
        }
    }

    /// Asks the admission about a poll of `device`: who polls it and where, or the declined outcome when another
    /// gateway holds it or its operator paused it.
    func admit(_ device: PolledDevice) -> Admission {
        let spec = device.spec
        guard let admission else { return .admitted(Admitted(spec: spec, holder: nil)) }
        switch admission.admit(spec.name) {
        case .decline:
            return .declined(.declined)
        case .paused:
            var outcome = PollOutcome.declined
            outcome.paused = true
            return .declined(outcome)
        case .poll(let holder):
            var spec = spec
            if let holder { spec.peripheral.adapter = holder.adapter }
            return .admitted(Admitted(spec: spec, holder: holder))
        }
    }

    /// What ``admit(_:)`` decided.
    enum Admission {
        case admitted(Admitted)
        /// With the outcome that says so (``PollOutcome/declined``, and ``PollOutcome/paused``).
        case declined(PollOutcome)
    }

    /// A scheduled poll's way in, before its task exists: the admission, then a place in the adapter's queue.
    /// `start` is given the poll to run once the slot is its own (at once if one is free); a declined tick starts
    /// nothing.
    func requestSlot(
        in window: PollWindow, device: PolledDevice, start: @escaping @Sendable (@escaping LaunchWork) -> Void
    ) -> LaunchRequest {
        guard case .admitted(var asked) = admit(device) else { return .declined }
        if let heard = listenedTo(&asked, device: device, start: start) { return heard }
        let admitted = asked
        if let holder = gate.holder(of: admitted.spec.name) {
            // A long link of other work (``withLink(to:holder:characteristics:connectTimeout:_:)``) has the device:
            // the tick gives up at once, as contention, rather than hold a slot the whole time waiting for it.
            var busy = admitted.outcome(
                .failed(TransportError(.noSlot, "the device is busy: \(holder) holds its link")))
            busy.busy = holder
            let outcome = busy
            start { _ in LaunchResult(outcome.result, detail: outcome, isContention: true) }
            return LaunchRequest(fallbackDetail: outcome)
        }
        let work: LaunchWork = { [weak self] window in
            guard let self else { return LaunchResult(.failed(CancellationError())) }
            var admitted = admitted
            // The window began when the launch asked for its slot: what has passed since is the wait.
            let granted = window.time.now
            admitted.granted = granted
            admitted.slotWait = window.began.duration(to: granted)
            if let late = self.tooLate(admitted, in: window) { return late }
            let outcome = await self.pollAdmitted(admitted, device: device, in: window)
            return LaunchResult(outcome.result, detail: outcome)
        }
        let adapter = admitted.spec.peripheral.adapter
        let unfinished = admitted.outcome(.noData)
        guard let ticket = limiter.request(adapter: adapter, key: admitted.spec.name, granted: { start(work) }) else {
            start(work)
            return LaunchRequest(fallbackDetail: unfinished)
        }
        return LaunchRequest(fallbackDetail: unfinished) { [limiter, configuration] in
            guard limiter.withdraw(ticket) else { return nil }
            let outcome = Self.slotWaitEnded(
                admitted, waited: window.began.duration(to: window.time.now), slots: configuration.maxConnections)
            return LaunchResult(outcome.result, detail: outcome, isContention: true)
        }
    }

    /// A poll outside the grid (a command): the admission and a connection slot (waited for in this task), then
    /// ``pollAdmitted(_:device:in:)``. Scheduled polls wait for their slot before their task exists
    /// (``requestSlot(in:device:start:)``); both take the slot before the device's gate, so neither can hold what
    /// the other waits for.
    func poll(_ device: PolledDevice, in window: PollWindow) async -> PollOutcome {
        let admitted: Admitted
        switch admit(device) {
        case .admitted(let asked): admitted = asked
        case .declined(let outcome): return outcome
        }
        if admitted.spec.isPassive, let listener {
            listener.start()
            return await passiveOutcome(admitted, of: device, in: window)
        }
        return await acquireAndPoll(admitted, device: device, in: window)
    }

    /// Waits for a connection slot in this task, then ``pollAdmitted(_:device:in:)``.
    func acquireAndPoll(_ admitted: Admitted, device: PolledDevice, in window: PollWindow) async -> PollOutcome {
        var admitted = admitted
        let asked = window.time.now
        do {
            try await limiter.acquire(adapter: admitted.spec.peripheral.adapter, key: admitted.spec.name)
        } catch {
            return Self.slotWaitEnded(
                admitted, waited: asked.duration(to: window.time.now), slots: configuration.maxConnections)
        }
        let granted = window.time.now
        admitted.granted = granted
        admitted.slotWait = asked.duration(to: granted)
        return await pollAdmitted(admitted, device: device, in: window)
    }

    /// A slot that came too late, after a wait: less of the window left than an attempt needs (the retry policy's
    /// `minimumAttemptTime`, at most half the budget). Connecting then would most likely end in the window's
    /// expiry, on the sensor's battery: the slot goes back at once and the poll is `noSlot`, the others' doing.
    private func tooLate(_ admitted: Admitted, in window: PollWindow) -> LaunchResult? {
        let needed = min(configuration.retry.minimumAttemptTime, window.budget / 2)
        guard let waited = admitted.slotWait, waited > .zero, window.timeRemaining < needed else { return nil }
        limiter.release(adapter: admitted.spec.peripheral.adapter)
        let outcome = Self.slotWaitEnded(
            admitted, waited: waited, slots: configuration.maxConnections, left: window.timeRemaining)
        return LaunchResult(outcome.result, detail: outcome, isContention: true)
    }

    /// The window ended before a slot was free: `noSlot`, the other devices' doing, not this one's.
    private static func slotWaitEnded(_ admitted: Admitted, waited: Duration, slots: Int, left: Duration? = nil)
        -> PollOutcome
    {
        var admitted = admitted
        admitted.slotWait = waited
        let adapter = admitted.spec.peripheral.adapter
        let message =
            if let left {
                """
                no connection slot free on \(adapter) in time: one came after \(waited.compact) with \(left.compact) \
                of the window left, too little for a poll of this device (other devices held all \(slots))
                """
            } else {
                """
                no connection slot free on \(adapter) within the window (waited \(waited.compact); other devices held \
                all \(slots))
                """
            }
        return admitted.outcome(.failed(TransportError(.noSlot, message)))
    }

    /// The poll once admitted and holding its connection slot, which it gives back at the end: the device's
    /// gate (one poll of a device at a time), the previous poll's disconnect, then the attempts.
    func pollAdmitted(_ admitted: Admitted, device: PolledDevice, in window: PollWindow) async -> PollOutcome {
        let spec = admitted.spec
        // The hold is learned only for placement: with it off, nothing reads it.
        let granted = configuration.placement ? admitted.granted : nil
        defer { releaseSlot(adapter: spec.peripheral.adapter, device: spec.name, granted: granted) }
        do {
            try await gate.enter(spec.name)
        } catch {
            return admitted.outcome(
                .failed(
                    TransportError(.timeout, "window ended while another poll of this device (a command's) was running")
                ))
        }
        defer { gate.leave(spec.name) }
        if let previous = teardowns.withLock({ $0.running[spec.name]?.done }) {
            // The last window's disconnect is still running: never connect over it.
            _ = await previous.valueUnlessCancelled()
            if Task.isCancelled {
                return admitted.outcome(
                    .failed(
                        TransportError(.timeout, "window ended while the previous poll's disconnect was still running"))
                )
            }
        }
        return await attempts(admitted, device: device, in: window)
    }

    /// The attempts of one window, once it holds a connection slot. Kept out of line: an async function's frame
    /// holds everything its inlined callees keep across a suspension, and the frames of the callers are
    /// allocated while a poll waits for the device's gate or a command waits for its slot.
    @inline(never)
    private func attempts(_ admitted: Admitted, device: PolledDevice, in window: PollWindow) async -> PollOutcome {
        let spec = admitted.spec
        let peripheral = spec.peripheral
        var outcome = admitted.outcome(.noData)
        while true {
            outcome.attempts += 1
            // Values and notifications belong to one attempt: a retry starts them afresh.
            let gathered = Gathered()
            let failure: TransportError
            do {
                do {
                    try await pollOnce(spec, device: device, window: window, into: gathered)
                } catch {
                    outcome.link = Self.adding(transport.linkTime(of: peripheral), to: outcome.link)
                    throw error
                }
                outcome.link = Self.adding(transport.linkTime(of: peripheral), to: outcome.link)
                (outcome.values, outcome.notifications) = gathered.contents
                outcome.result =
                    device.succeeded(values: outcome.values, notifications: outcome.notifications) ? .newData : .noData
                outcome.readings = device.readings(values: outcome.values, notifications: outcome.notifications)
                return outcome
            } catch {
                failure = Self.transportError(error)
            }
            // A failed attempt's record still shows what it read before failing.
            (outcome.values, outcome.notifications) = gathered.contents
            outcome.readings = device.readings(values: outcome.values, notifications: outcome.notifications)
            outcome.result = .failed(failure)
            let context: Logger.Metadata = [
                "device": "\(spec.name)", "address": "\(peripheral.address)", "attempt": "\(outcome.attempts)",
                "error": "\(failure)",
            ]
            // A zombie link is not retried in its window: the record says so, the next poll makes a new link.
            guard failure.isTransient, failure.code != .silentLink, !Task.isCancelled else {
                logger.warning("poll failed", metadata: context)
                return outcome
            }
            guard let delay = configuration.retry.delay(afterAttempt: outcome.attempts),
                window.timeRemaining > delay + configuration.retry.minimumAttemptTime
            else {
                logger.warning("poll failed; no attempt left in this window", metadata: context)
                return outcome
            }
            logger.info("poll failed; retrying", metadata: context.merging(["delay": "\(delay.compact)"]) { $1 })
            do {
                try await window.time.sleep(for: delay)
            } catch {
                return outcome
            }
        }
    }

    /// connect → write → read → listen, then disconnect on every path.
    private func pollOnce(_ spec: PeripheralSpec, device: PolledDevice, window: PollWindow, into gathered: Gathered)
        async throws
    {
        let peripheral = spec.peripheral
        // The transport's deadline ends a little before the window's (a tenth of what is left, at most 250 ms): a
        // scan that found nothing or a connect that never completed is recorded as what it was (deviceNotFound,
        // timeout), not as the window's expiry. With both at the same instant, which of the two timers fired
        // first decided the record's code (the healing end-to-end test saw either under load).
        let remaining = window.timeRemaining
        let timeout = min(configuration.connectTimeout, remaining - min(remaining / 10, .milliseconds(250)))
        let (time, adapter) = (window.time, peripheral.adapter)
        do {
            var started = metrics.start(time)
            try await transport.connect(
                peripheral, options: ConnectOptions(timeout: timeout, characteristics: spec.characteristics))
            metrics.connected(
                on: adapter, since: started, resolution: transport.serviceResolutionTime(of: peripheral), time)
            for write in spec.writes {
                started = metrics.start(time)
                try await transport.write(write.value, to: write.characteristic, of: peripheral, type: write.type)
                metrics.ended(.write, on: adapter, since: started, time)
            }
            for characteristic in spec.reads {
                started = metrics.start(time)
                let bytes = try await transport.read(characteristic, from: peripheral)
                metrics.ended(.read, on: adapter, since: started, time)
                gathered.add(value: PollRecord.Value(characteristic: characteristic, bytes: bytes))
            }
            await readPresentationFormats(spec, device: device)
            if !spec.notifications.isEmpty {
                try await listen(spec, window: window, into: gathered)
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
    private func readPresentationFormats(_ spec: PeripheralSpec, device: PolledDevice) async {
        for characteristic in spec.presentationCandidates where !device.knowsPresentation(of: characteristic) {
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
                device.setPresentation(format, of: characteristic)
            } catch {
                logger.debug(
                    "0x2904 descriptor not read, asked again next poll",
                    metadata: ["device": "\(spec.name)", "uuid": "\(characteristic)", "error": "\(error)"]
                )
            }
        }
    }

    /// Subscribes to every notifying characteristic and collects values for each one's duration, in parallel.
    private func listen(_ spec: PeripheralSpec, window: PollWindow, into gathered: Gathered) async throws {
        let peripheral = spec.peripheral
        var streams: [(PeripheralSpec.Subscription, AsyncThrowingStream<[UInt8], any Error>)] = []
        let time = window.time
        for subscription in spec.notifications {
            let started = metrics.start(time)
            streams.append(
                (subscription, try await transport.notifications(from: subscription.characteristic, of: peripheral)))
            metrics.ended(.subscribe, on: peripheral.adapter, since: started, time)
        }
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
                                gathered.add(
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
                                    of: subscription, bound: silence, lastHeard: lastHeard,
                                    until: started + subscription.duration, time: time)
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
    func disconnect(_ peripheral: Peripheral, device: String) async {
        let transport = self.transport
        let timeout = configuration.disconnectTimeout
        let (teardowns, metrics, time) = (self.teardowns, self.metrics, keepAlive.time)
        // Registered under the lock before the task can finish, and removed by the task itself as it ends: a
        // finished disconnect is never left looking pending.
        let done = Promise<Void>()
        teardowns.withLock { state in
            let id = state.nextID
            state.nextID += 1
            Task(executorPreference: transport.preferredExecutor) {
                let started = metrics.start(time)
                await transport.disconnect(peripheral, timeout: timeout)
                metrics.ended(.disconnect, on: peripheral.adapter, since: started, time)
                teardowns.withLock { state in
                    if state.running[device]?.id == id { state.running[device] = nil }
                }
                done.succeed()
            }
            state.running[device] = Teardown(id: id, done: done)
        }
        _ = await done.valueUnlessCancelled()
    }

    /// Gives the connection slot back, or, while the device's disconnect still runs, once it has finished; the
    /// placement learns how long the poll held it.
    func releaseSlot(adapter: String, device: String, granted: KeepAliveInstant?) {
        let time = keepAlive.time
        guard let pending = teardowns.withLock({ $0.running[device]?.done }) else {
            if let granted { placement.learn(device, hold: granted.duration(to: time.now)) }
            limiter.release(adapter: adapter)
            return
        }
        let (limiter, placement) = (self.limiter, self.placement)
        Task {
            _ = try? await pending.value()
            if let granted { placement.learn(device, hold: granted.duration(to: time.now)) }
            limiter.release(adapter: adapter)
        }
    }

    /// Link times over attempts: the known ones summed, `nil` while none is known.
    private static func adding(_ link: Duration?, to total: Duration?) -> Duration? {
        guard let link else { return total }
        return (total ?? .zero) + link
    }

    static func transportError(_ error: any Error) -> TransportError {
        switch error {
        case let error as TransportError: error
        case is CancellationError: TransportError(.timeout, "window expired or was cancelled")
        default: TransportError(.failed, String(describing: error))
        }
    }
}

/// A scheduled poll's `LaunchGate`: ``PollEngine/requestSlot(in:device:start:)``.
struct SlotGate: LaunchGate {
    weak let engine: PollEngine?
    let device: PolledDevice

    var preferredExecutor: (any TaskExecutor)? { engine?.transport.preferredExecutor }
    var reportsOnPreferredExecutor: Bool { engine?.configuration.recordsOnTransportExecutor ?? false }

    func request(_ window: PollWindow, start: @escaping @Sendable (@escaping LaunchWork) -> Void) -> LaunchRequest {
        guard let engine else { return .declined }
        return engine.requestSlot(in: window, device: device, start: start)
    }
}

/// What one attempt of a poll has gathered so far: its values, and the notifications its listeners add from
/// tasks of their own. The attempt's own, never shared with another poll or the report.
final class Gathered: Sendable {
    private let state = Locked<(values: [PollRecord.Value], notifications: [PollRecord.Notification])>(([], []))

    func add(value: PollRecord.Value) {
        state.withLock { $0.values.append(value) }
    }

    func add(notification: PollRecord.Notification) {
        state.withLock { $0.notifications.append(notification) }
    }

    var contents: (values: [PollRecord.Value], notifications: [PollRecord.Notification]) {
        state.withLock { $0 }
    }
}
