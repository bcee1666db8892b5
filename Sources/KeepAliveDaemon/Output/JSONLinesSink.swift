public import KeepAlive
internal import Locking

#if canImport(Glibc)
internal import Glibc
#endif

/// Writes poll records as JSON Lines: one object per device per tick, each line handed to the kernel with
/// its own `write(2)` as it is made (no buffering to lose on a crash), `seq` contiguous per process.
///
/// The schema is in the README ("Output"). Timestamps are wall-clock UTC, RFC 3339 with milliseconds.
///
/// ```swift
/// let writer = try RecordWriter(output: .standardOutput)
/// let engine = PollEngine(peripherals: specs, transport: transport, keepAlive: keepAlive,
///                         onRecord: { writer.write($0) })
/// ```
public final class RecordWriter: Sendable {
    /// Why the output could not be opened or written.
    public struct OutputError: Error, Sendable, Hashable, CustomStringConvertible {
        public var path: String
        public var errno: Int32
        public var operation: String
        public var description: String {
            "cannot \(operation) \(path == "-" ? "standard output" : path): \(String(cString: strerror(errno))) (errno \(errno))"
        }
    }

    private struct State {
        var descriptor: Int32
        var ownsDescriptor: Bool
        var nextSequence: UInt64 = 0
        var failure: OutputError?
    }

    public let output: DaemonConfiguration.Output
    private let state: Locked<State>
    private let onFailure: (@Sendable (OutputError) -> Void)?
    /// Sees every record with its `seq` and its line (no newline), under the writer's lock: in `seq` order, and
    /// before the record counts as written (the MQTT bridge's spool).
    private let sink: (@Sendable (PollRecord, UInt64, String) -> Void)?

    /// Opens the output: standard output, or a file opened for appending (created 0640 when missing).
    /// `onFailure` is called once if a write ever fails (EPIPE, ENOSPC…); later records are then counted as lost.
    public init(
        output: DaemonConfiguration.Output,
        onFailure: (@Sendable (OutputError) -> Void)? = nil,
        sink: (@Sendable (PollRecord, UInt64, String) -> Void)? = nil
    ) throws(OutputError) {
        self.output = output
        self.onFailure = onFailure
        self.sink = sink
        switch output {
        case .none:
            state = Locked(State(descriptor: -1, ownsDescriptor: false))
        case .standardOutput:
            state = Locked(State(descriptor: STDOUT_FILENO, ownsDescriptor: false))
        case .file(let path):
            let descriptor = open(path, O_RDWR | O_CREAT | O_APPEND | O_CLOEXEC, 0o640)
            guard descriptor >= 0 else { throw OutputError(path: path, errno: errno, operation: "open") }
            // A previous run cut short mid-line (a full disk, a kill) left no newline: end that line first, so
            // this run's first record is a line of its own.
            var last: UInt8 = 0
            if lseek(descriptor, -1, SEEK_END) >= 0, read(descriptor, &last, 1) == 1, last != UInt8(ascii: "\n") {
                if let error = Self.writeAll("\n", to: descriptor, path: path) {
                    _ = Glibc.close(descriptor)
                    throw error
                }
            }
            state = Locked(State(descriptor: descriptor, ownsDescriptor: true))
        }
    }

    deinit {
        close()
    }

    /// Records written so far (the next record's `seq`).
    public var written: UInt64 {
        state.withLock { $0.nextSequence }
    }

    /// Whether a write can never wait for a reader: no output, or a regular file (standard output redirected to
    /// one included). A pipe (journald's, a shell's), a terminal or a socket can make a write wait.
    public var neverBlocks: Bool {
        state.withLock { state in
            guard state.descriptor >= 0 else { return output == .none }
            var status = stat()
            return fstat(state.descriptor, &status) == 0 && status.st_mode & S_IFMT == S_IFREG
        }
    }

    /// The write error that stopped the output, if one did.
    public var failure: OutputError? {
        state.withLock { $0.failure }
    }

    /// Encodes and writes one record now. Safe from any thread; lines never interleave. `healing`: a step of the
    /// adapter healing ladder taken since the device's last record, written as `"healing": {"action", "why"}`.
    public func write(_ record: PollRecord, healing: HealingStep? = nil) {
        let failed: OutputError? = state.withLock { state in
            guard state.failure == nil, state.descriptor >= 0 || output == .none else { return nil }
            // Read under the lock: `ts` never goes backwards while `seq` goes forwards.
            let now = WallClock.now()
            let line = Self.encode(record, sequence: state.nextSequence, at: now, healing: healing)
            // The sink (the MQTT bridge's spool) first: a record in the output is then always in the spool too, even
            // when the process is killed between the two (a CI run caught a line on stdout that the next start never
            // delivered). A failed output write stops all later records, so its `seq` is never reused.
            sink?(record, state.nextSequence, line)
            if output != .none, let error = Self.writeAll(line + "\n", to: state.descriptor, path: output.description) {
                state.failure = error
                return error
            }
            state.nextSequence += 1
            return nil
        }
        if let failed { onFailure?(failed) }
    }

    /// Closes a file output; standard output is left open. Idempotent.
    public func close() {
        state.withLock { state in
            if state.ownsDescriptor, state.descriptor >= 0 { _ = Glibc.close(state.descriptor) }
            state.descriptor = -1
        }
    }

    private static func writeAll(_ line: String, to descriptor: Int32, path: String) -> OutputError? {
        ProcessIO.write(line, to: descriptor).map { OutputError(path: path, errno: $0, operation: "write to") }
    }

    // MARK: Encoding

    /// One record's line as it would be written now (no newline): for the bridge and the benchmarks.
    package static func line(for record: PollRecord, sequence: UInt64) -> String {
        encode(record, sequence: sequence, at: WallClock.now())
    }

    /// One record as a JSON object (no newline), in the README's key order.
    static func encode(_ record: PollRecord, sequence: UInt64, at now: WallClock.Time, healing: HealingStep? = nil) -> String {
        // The record's monotonic instants are placed on the wall clock relative to now: the poll finished
        // about `fired + used`, which is this moment. Robust to a wall-clock step during the poll.
        let finished = record.fired + (record.window?.used ?? .zero)
        var line = JSONLine()
        line.string("ts", now.rfc3339)
        line.integer("seq", sequence)
        line.string("device", record.device)
        line.string("address", record.peripheral.address)
        line.string("adapter", record.peripheral.adapter)
        line.integer("tick", record.tick)
        line.string("result", record.result.rawValue)
        line.string("trigger", record.trigger.rawValue)
        if let holder = record.holder {
            // Shared devices only (a fleet of gateways): who polled, and on the first poll after a handover, how.
            line.string("holder", holder.gateway)
            if let handover = holder.handover {
                line.object("handover") { object in
                    if let from = handover.from { object.string("from", from) } else { object.null("from") }
                    object.string("reason", handover.reason)
                }
            }
        }
        if let healing {
            // What the healing ladder did on this device's adapter since its last record (README: Healing).
            line.object("healing") { object in
                object.string("action", healing.action.rawValue)
                object.string("why", healing.why)
            }
        }
        line.object("values") { values in
            for value in record.values {
                values.string(value.characteristic.shortDescription, value.bytes.hexString)
            }
        }
        line.array("notifications", record.notifications) { entry, notification in
            entry.string("uuid", notification.characteristic.shortDescription)
            entry.string("ts", now.advanced(by: finished.duration(to: notification.at)).rfc3339)
            entry.string("hex", notification.bytes.hexString)
        }
        line.readings("readings", record.readings)
        if let failure = record.failure {
            line.object("error") { error in
                error.string("code", failure.code)
                error.string("message", failure.message)
                error.bool("transient", failure.transient)
                if let name = failure.dbusName { error.string("dbus_name", name) }
            }
        } else {
            line.null("error")
        }
        if let window = record.window {
            line.object("window") { object in
                object.integer("id", window.id.rawValue)
                object.integer("budget_ms", window.budget.milliseconds)
                object.integer("used_ms", window.used.milliseconds)
                object.string("outcome", window.outcome.rawValue)
            }
        } else {
            line.null("window")
        }
        line.integer("attempts", record.attempts)
        line.integer("interval_ms", record.interval.milliseconds)
        line.string("power", record.power.rawValue)
        return line.finished
    }
}


/// The wall clock, for timestamps people and log tools read (never for scheduling).
enum WallClock {
    struct Time: Sendable, Hashable {
        var seconds: Int
        var nanoseconds: Int

        func advanced(by duration: Duration) -> Time {
            let total = Int128(seconds) * 1_000_000_000 + Int128(nanoseconds)
                + Int128(duration.components.seconds) * 1_000_000_000 + Int128(duration.components.attoseconds / 1_000_000_000)
            let (quotient, remainder) = total.quotientAndRemainder(dividingBy: 1_000_000_000)
            return remainder < 0
                ? Time(seconds: Int(quotient) - 1, nanoseconds: Int(remainder) + 1_000_000_000)
                : Time(seconds: Int(quotient), nanoseconds: Int(remainder))
        }

        /// `2026-11-27T21:40:05.123Z`, in UTC, milliseconds truncated. Every record has one: its 24 bytes are
        /// written in place (padding and joining eight `String`s cost 9,500 instructions, 1.3 % of a poll).
        var rfc3339: String {
            var time = time_t(seconds)
            var parts = tm()
            gmtime_r(&time, &parts)
            let year = parts.tm_year + 1900
            guard (0...9999).contains(year) else { return Self.rfc3339(parts, milliseconds: nanoseconds / 1_000_000) }
            let fields: [(value: Int32, width: Int, after: UInt8)] = [
                (year, 4, UInt8(ascii: "-")), (parts.tm_mon + 1, 2, UInt8(ascii: "-")), (parts.tm_mday, 2, UInt8(ascii: "T")),
                (parts.tm_hour, 2, UInt8(ascii: ":")), (parts.tm_min, 2, UInt8(ascii: ":")), (parts.tm_sec, 2, UInt8(ascii: ".")),
                (Int32(nanoseconds / 1_000_000), 3, UInt8(ascii: "Z")),
            ]
            return String(unsafeUninitializedCapacity: 24) { buffer in
                var index = 0
                for field in fields {
                    var value = field.value
                    for position in stride(from: index + field.width - 1, through: index, by: -1) {
                        buffer[position] = UInt8(ascii: "0") + UInt8(truncatingIfNeeded: value % 10)
                        value /= 10
                    }
                    buffer[index + field.width] = field.after
                    index += field.width + 1
                }
                return index
            }
        }

        /// The general form, for a year outside 0…9999 (a clock set far off).
        private static func rfc3339(_ parts: tm, milliseconds: Int) -> String {
            func pad(_ value: Int32, _ width: Int) -> String {
                let text = String(value)
                return text.count >= width ? text : String(repeating: "0", count: width - text.count) + text
            }
            return pad(parts.tm_year + 1900, 4) + "-" + pad(parts.tm_mon + 1, 2) + "-" + pad(parts.tm_mday, 2)
                + "T" + pad(parts.tm_hour, 2) + ":" + pad(parts.tm_min, 2) + ":" + pad(parts.tm_sec, 2)
                + "." + pad(Int32(milliseconds), 3) + "Z"
        }
    }

    static func now() -> Time {
        var spec = timespec()
        clock_gettime(CLOCK_REALTIME, &spec)
        return Time(seconds: spec.tv_sec, nanoseconds: spec.tv_nsec)
    }
}
