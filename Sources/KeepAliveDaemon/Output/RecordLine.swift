import Basics
import KeepAlive
public import Polling

#if canImport(Glibc)
    internal import Glibc
#endif

/// A record as the daemon writes it: one JSON object, in the README's key order ("Output"). The JSON Lines
/// output writes it with a newline; the MQTT bridge publishes it as the record's payload.
public enum RecordLine {
    /// One record's line as it would be written now (no newline): for the bridge and the benchmarks.
    public static func line(for record: PollRecord, sequence: UInt64) -> String {
        encode(record, sequence: sequence, at: WallClock.now())
    }

    /// One record as a JSON object (no newline), in the README's key order.
    static func encode(_ record: PollRecord, sequence: UInt64, at now: WallClock.Time, healing: HealingStep? = nil)
        -> String
    {
        // The record's monotonic instants are placed on the wall clock relative to now: the poll finished
        // about `fired + used`, which is this moment. Robust to a wall-clock step during the poll.
        let finished = record.fired + (record.window?.used ?? .zero)
        var line = JSONObject()
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
        if let busy = record.busy {
            // A noSlot tick that gave up because other work held the device's link (a history download).
            line.string("busy", busy)
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
        if let slotWait = record.slotWait {
            line.integer("slot_wait_ms", slotWait.milliseconds)
        } else {
            line.null("slot_wait_ms")
        }
        if let link = record.link { line.integer("link_ms", link.milliseconds) } else { line.null("link_ms") }
        if let heard = record.heard {
            // Devices listened to: where the readings came from, how often the device was heard, how strong.
            line.string("source", record.source.rawValue)
            line.integer("heard", heard.count)
            if let rssi = heard.rssi { line.integer("rssi", Int(rssi)) } else { line.null("rssi") }
            if let id = heard.packetID { line.integer("packet_id", UInt64(id)) } else { line.null("packet_id") }
            if let format = heard.format { line.string("format", format.rawValue) }
        } else if record.source == .history {
            // A record of the device's own log: `ts` is when it was written here, `measured` when the device
            // measured it (its clock corrected to the gateway's).
            line.string("source", record.source.rawValue)
            if let measured = record.measured {
                line.string("measured", WallClock.Time(seconds: 0, nanoseconds: 0).advanced(by: measured).rfc3339)
            }
        }
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
            let total =
                Int128(seconds) * 1_000_000_000 + Int128(nanoseconds)
                + Int128(duration.components.seconds) * 1_000_000_000
                + Int128(duration.components.attoseconds / 1_000_000_000)
            let (quotient, remainder) = total.quotientAndRemainder(dividingBy: 1_000_000_000)
            return remainder < 0
                ? Time(seconds: Int(quotient) - 1, nanoseconds: Int(remainder) + 1_000_000_000)
                : Time(seconds: Int(quotient), nanoseconds: Int(remainder))
        }

        /// `2026-11-27T21:40:05.123Z`, in UTC, milliseconds truncated. Every record has one: its 24 bytes are
        /// written in place (padding and joining eight `String`s cost several times more).
        var rfc3339: String {
            var time = time_t(seconds)
            var parts = tm()
            gmtime_r(&time, &parts)
            let year = parts.tm_year + 1900
            guard (0...9999).contains(year) else { return Self.rfc3339(parts, milliseconds: nanoseconds / 1_000_000) }
            let fields: [(value: Int32, width: Int, after: UInt8)] = [
                (year, 4, UInt8(ascii: "-")), (parts.tm_mon + 1, 2, UInt8(ascii: "-")),
                (parts.tm_mday, 2, UInt8(ascii: "T")),
                (parts.tm_hour, 2, UInt8(ascii: ":")), (parts.tm_min, 2, UInt8(ascii: ":")),
                (parts.tm_sec, 2, UInt8(ascii: ".")),
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
