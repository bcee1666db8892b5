import KeepAlive
import Logging
import MQTT
import ServiceLifecycle

extension MQTTBridge {
    /// Connects, keeps the broker up to date and delivers the spool until graceful shutdown (or cancellation);
    /// then publishes `offline` (retained), disconnects and finishes ``commands``. At a graceful shutdown it first
    /// goes on delivering for up to ``BridgeConfiguration/shutdownDrainBound``, while connected and until the spool
    /// is empty: the records of the last polls reach the broker instead of waiting for the next start.
    ///
    /// Call it once (the service group does). The first connection is retried here with
    /// ``MQTTConfiguration/reconnect``'s backoff (1 s doubling to
    /// 60 s, jittered, by default) for as long as it takes; records submitted meanwhile wait in the spool.
    ///
    /// - Throws: `MQTTError` when the client cannot be created (a client id, will or TLS file libmosquitto
    ///   rejects): a configuration error, not a broker that is away.
    public func run() async throws {
        defer { commandContinuation.finish() }
        let client = try MQTTClient(configuration: configuration.mqtt)
        state.withLock { $0.client = client }
        await withTaskGroup(of: Void.self) { group in
            group.addTask { await self.followEvents(of: client) }
            group.addTask { await self.handleMessages(of: client) }
            group.addTask { await self.work(with: client) }
            // The end: a graceful shutdown, then the drain while the others keep delivering (cancellation ends it
            // at once, drain and all).
            group.addTask {
                guard (try? await gracefulShutdown()) != nil else { return }
                await self.drain(within: self.configuration.shutdownDrainBound)
            }
            await group.next()
            group.cancelAll()
        }
        state.withLock { state in
            state.connected = false
            state.client = nil
        }
        connectionChanged(false)
        // Not in this task: it may be cancelled, and the close must still publish `offline`.
        let offline = retained(topics.status, "offline")
        await Task { await client.close(publishing: [offline]) }.value
        logger.info("MQTT bridge stopped", metadata: ["pending": "\(statistics.pending)"])
    }

    /// Waits, up to `bound`, while the broker is connected and records are pending. Checked every 20 ms: at
    /// shutdown only, and bounded.
    private func drain(within bound: Duration) async {
        let clock = TimerFDClock()
        let deadline = clock.now.advanced(by: bound)
        while statistics.connected, statistics.pending > 0, clock.now < deadline {
            do { try await clock.sleep(for: .milliseconds(20)) } catch { return }
        }
    }

    /// Connection changes: every CONNACK queues the announcements a fresh connection needs.
    private func followEvents(of client: MQTTClient) async {
        for await event in client.events {
            switch event {
            case .connected(let sessionPresent, let version):
                logger.info(
                    "connected to the MQTT broker",
                    metadata: [
                        "broker": "\(configuration.mqtt.broker)", "session": "\(sessionPresent)",
                        "protocol": "\(version)",
                    ])
                state.withLock { state in
                    state.connected = true
                    state.enqueue(.connected)
                }
                wakeupContinuation.yield()
                connectionChanged(true)
            case .disconnected(let error):
                state.withLock { $0.connected = false }
                connectionChanged(false)
                logger.warning("lost the MQTT broker; spooling", metadata: ["error": "\(error)"])
            case .connectFailed(let error, let retry):
                connectionFailed(error, retry: retry)
            }
        }
    }

    /// A failed connection attempt, the first connection's or a reconnection's, as one warning that reads the same
    /// every time: the daemon's log folds it like a device's repeated warning (`RepeatedWarnings` keys a line that
    /// names a `broker` and an `error` by the broker and the error's class), so a wrong password or a port without
    /// TLS is written once, the retries are counted, and their summary goes out when `connected to the MQTT broker`
    /// is logged for the broker (or at shutdown, or with the next one an hour later).
    private func connectionFailed(_ error: MQTTError, retry: Duration) {
        logger.warning(
            "cannot connect to the MQTT broker; retrying",
            metadata: ["broker": "\(configuration.mqtt.broker)", "error": "\(error)", "retry": "\(retry.compact)"])
    }

    /// The first connection with backoff, then the outgoing queue and the spool, at every wake-up.
    private func work(with client: MQTTClient) async {
        var random = SystemRandomNumberGenerator()
        var attempt = 0
        while true {
            do {
                try await client.connect()
                break
            } catch {
                if error.code == .cancelled || error.code == .closed || Task.isCancelled { return }
                let delay = configuration.mqtt.reconnect.delay(beforeAttempt: attempt, using: &random)
                attempt += 1
                connectionFailed(error, retry: delay)
                do { try await Task.sleep(for: delay) } catch { return }
            }
        }
        for await _ in wakeups {
            guard state.withLock({ $0.connected }) else { continue }
            guard await flushOutgoing(client) else { continue }
            await deliverSpool(client)
        }
    }

    /// Publishes what is queued, in order; false when the connection went (the rest stays queued, and the next
    /// CONNACK queues a full announcement anyway).
    private func flushOutgoing(_ client: MQTTClient) async -> Bool {
        defer { state.withLock { $0.flushing = false } }
        while let item = state.withLock({ state -> BridgeState.Outgoing? in
            guard !state.outgoing.isEmpty else { return nil }
            state.flushing = true
            return state.outgoing.removeFirst()
        }) {
            do {
                switch item {
                case .message(let message):
                    try await client.publish(message)
                case .connected:
                    try await announceConnection(client)
                case .announceAll:
                    try await announceDiscovery(client, devices: nil)
                case .announce(let device):
                    try await announceDiscovery(client, devices: [device])
                }
            } catch  where error.code == .disconnected || error.code == .cancelled || error.code == .closed {
                if case .message = item {} else { state.withLock { $0.outgoing.insert(item, at: 0) } }
                return false
            } catch {
                logger.error("MQTT publish refused", metadata: ["error": "\(error)"])
            }
        }
        return true
    }

    /// How many records are in flight at most (and ``MQTTConfiguration/maximumInflight`` if less).
    static let deliveryWindow = 64

    /// Delivers pending records in spool order, a window of them at a time, until the spool is empty, the
    /// connection goes, or new control work waits.
    ///
    /// Each round reads up to ``deliveryWindow`` records under one spool lock, hands them to the client as one
    /// batch (so the broker sees them in `seq` order, and they are in flight together) and, once each has its
    /// PUBACK, moves the spool's acknowledged mark past them with one write. The mark only moves over a prefix:
    /// when the connection goes mid-batch, it stays before the first record that was not acknowledged, and the
    /// next connection delivers again from there (so a crash or a reconnection replays at most the batch in
    /// flight: at least once, in order). A record the broker refuses for good is skipped and logged.
    private func deliverSpool(_ client: MQTTClient) async {
        let window = max(1, min(Self.deliveryWindow, configuration.mqtt.maximumInflight))
        while !Task.isCancelled {
            if state.withLock({ !$0.outgoing.isEmpty }) {
                wakeupContinuation.yield()
                return
            }
            // Nothing while `submit`'s direct route has a record out: its PUBACK wakes this task when more waits.
            let next = spool.withLock { spool -> Result<[(entry: Spool.Entry, record: SpoolRecord?)], BridgeError> in
                Result { () throws(BridgeError) in
                    guard spool.outForDelivery == .none else { return [] }
                    let entries = spool.entries(after: nil, count: window)
                    let batch = Array(zip(entries, try spool.read(entries)))
                    if !batch.isEmpty { spool.outForDelivery = .batch }
                    return batch
                }
            }
            let batch: [(entry: Spool.Entry, record: SpoolRecord?)]
            switch next {
            case .success(let found):
                guard !found.isEmpty else { return }
                batch = found
            case .failure(let error):
                logger.error("cannot read the spool", metadata: ["error": "\(error)"])
                return
            }
            let messages = batch.compactMap { item in
                item.record.map { record in
                    MQTTOutgoingMessage(
                        topic: topics.record(record), payload: record.payload, qos: configuration.qos,
                        retain: false, properties: MQTTProperties(contentType: "application/json"))
                }
            }
            state.withLock { $0.largestDeliveryBatch = max($0.largestDeliveryBatch, messages.count) }
            var outcomes = await client.publish(batch: messages)[...]
            // The records done with, in order: acknowledged, refused for good, or unreadable.
            var done = 0
            var lost = 0
            var interrupted = false
            for (entry, record) in batch {
                guard let record else {
                    spool.withLock { $0.loseUnreadableRecord() }
                    lost += 1
                    logger.error(
                        "a spooled record no longer reads back whole; counted as dropped",
                        metadata: [
                            "segment": "\(Spool.segmentName(entry.segment))", "offset": "\(entry.offset)",
                            "bytes": "\(entry.size)",
                        ])
                    done += 1
                    continue
                }
                if case .failure(let error) = outcomes.removeFirst() {
                    if error.code == .disconnected || error.code == .cancelled || error.code == .closed {
                        interrupted = true
                        break
                    }
                    // Refused for good (too large for the broker, not authorised): retrying would block every
                    // record behind it.
                    logger.error(
                        "the broker refused a record; skipping it",
                        metadata: ["device": "\(record.device)", "seq": "\(record.sequence)", "error": "\(error)"])
                }
                done += 1
            }
            let last = done > 0 ? batch[done - 1].entry.id : nil
            let acknowledged = spool.withLock { spool in
                spool.outForDelivery = .none
                return Result { () throws(BridgeError) in if let last { try spool.acknowledge(through: last) } }
            }
            if let last { noteAcknowledged(through: last) }
            if case .failure(let error) = acknowledged {
                logger.error("cannot record an acknowledgement in the spool", metadata: ["error": "\(error)"])
            }
            if lost > 0 {
                let total = spool.withLock { $0.dropped }
                state.withLock { $0.enqueue(.message(retained(topics.dropped, "\(total)"))) }
                wakeupContinuation.yield()
            }
            if interrupted { return }
        }
    }
}
