import ArgumentParser
import Basics
import DBus

#if canImport(Glibc)
    import Glibc
#endif

/// The CLI's side of the daemon's control interface (`io.keepalive.Daemon1`, docs/CONTROL.md): one call, and
/// every way it can fail said in words, with an exit status a script can tell apart.
struct ControlClient {
    /// sysexits(3): no daemon answers (EX_UNAVAILABLE), steering refused by the bus policy (EX_NOPERM).
    static let unavailable: Int32 = 69
    static let notPermitted: Int32 = 77

    let bus: DBusConnection.Bus

    /// Calls `method` on the daemon and returns its reply; prints what went wrong and exits otherwise.
    func call(_ method: String, _ arguments: [DBusValue] = [], timeout: Duration = .seconds(25)) async throws
        -> [DBusValue]
    {
        let connection: DBusConnection
        do {
            connection = try await DBusConnection(bus: bus, timeout: .seconds(5))
        } catch {
            writeOut("keepalive: cannot connect to the \(busName): \(error)\n", to: STDERR_FILENO)
            throw ExitCode(Self.unavailable)
        }
        defer { Task { await connection.close() } }
        do {
            return try await connection.call(
                destination: "io.keepalive", path: "/io/keepalive/Daemon", interface: "io.keepalive.Daemon1",
                method: method, arguments: arguments, timeout: timeout)
        } catch let error as DBusError {
            let (text, status) = Self.words(for: error, bus: busName)
            writeOut("keepalive: \(text)\n", to: STDERR_FILENO)
            throw ExitCode(status)
        }
    }

    private var busName: String {
        switch bus {
        case .system: "system bus"
        case .session: "session bus"
        case .address(let address): "bus at \(address)"
        }
    }

    /// What a D-Bus error means to the person who typed the command, and the exit status.
    static func words(for error: DBusError, bus: String) -> (String, Int32) {
        let said = error.message.isEmpty ? error.name ?? "\(error.code)" : error.message
        switch error.name {
        case "org.freedesktop.DBus.Error.ServiceUnknown", "org.freedesktop.DBus.Error.NameHasNoOwner":
            return (
                """
                no keepalive daemon answers on the \(bus) (io.keepalive has no owner): is `keepalive run` running \
                (systemctl status keepalive)?
                """, unavailable
            )
        case "org.freedesktop.DBus.Error.AccessDenied":
            return (
                """
                not allowed: only root and members of the `keepalive` group may steer the daemon (poll, interval, \
                pause, resume); reading (status, explain) is open to everyone. The bus said: \(said)
                """, notPermitted
            )
        case "org.freedesktop.DBus.Error.NoReply", "org.freedesktop.DBus.Error.Timeout":
            return ("the daemon did not answer in time: \(said)", unavailable)
        case "org.freedesktop.DBus.Error.UnknownObject", "org.freedesktop.DBus.Error.UnknownMethod",
            "org.freedesktop.DBus.Error.UnknownInterface":
            return ("the process owning io.keepalive is not a keepalive daemon of this version: \(said)", unavailable)
        case "io.keepalive.Error.UnknownDevice":
            return ("\(said) (`keepalive status` lists the devices)", 1)
        case .some(let name) where name.hasPrefix("io.keepalive.Error."):
            return (said, 1)
        default:
            return ("the \(bus) said: \(error)", unavailable)
        }
    }
}

extension DBusValue {
    /// As JSON: `a{sv}` dictionaries as objects, arrays as arrays, numbers as numbers (NaN and infinities as null).
    var json: String {
        switch self {
        case .boolean(let value): return value ? "true" : "false"
        case .byte(let value): return String(value)
        case .int16(let value): return String(value)
        case .uint16(let value): return String(value)
        case .int32(let value): return String(value)
        case .uint32(let value): return String(value)
        case .int64(let value): return String(value)
        case .uint64(let value): return String(value)
        case .double(let value): return value.isFinite ? "\(value)" : "null"
        case .string(let value): return Self.quoted(value)
        case .objectPath(let value): return Self.quoted(value.rawValue)
        case .signature(let value): return Self.quoted(value.rawValue)
        case .unixFileDescriptor: return "null"
        case .bytes(let bytes): return "[" + bytes.map { String($0) }.joined(separator: ",") + "]"
        case .array(_, let values): return "[" + values.map(\.json).joined(separator: ",") + "]"
        case .structure(let values): return "[" + values.map(\.json).joined(separator: ",") + "]"
        case .variant(let value): return value.json
        case .dictionary(_, _, let entries):
            return "{"
                + entries.map { entry in
                    let key: String = if case .string(let key) = entry.key { key } else { entry.key.json }
                    return Self.quoted(key) + ":" + entry.value.json
                }.joined(separator: ",") + "}"
        }
    }

    private static func quoted(_ value: String) -> String {
        var text = ""
        JSONString.append(value, to: &text)
        return text
    }

    /// The value inside a variant.
    var unwrapped: DBusValue {
        if case .variant(let inner) = self { return inner.unwrapped }
        return self
    }

    var stringValue: String? {
        if case .string(let value) = unwrapped { return value }
        return nil
    }

    var doubleValue: Double? {
        switch unwrapped {
        case .double(let value): value
        case .uint32(let value): Double(value)
        case .uint64(let value): Double(value)
        case .int16(let value): Double(value)
        case .int32(let value): Double(value)
        case .int64(let value): Double(value)
        default: nil
        }
    }

    var boolValue: Bool? {
        if case .boolean(let value) = unwrapped { return value }
        return nil
    }

    /// An `a{sv}` as a Swift dictionary (empty for anything else).
    var fields: [String: DBusValue] {
        guard case .dictionary(_, _, let entries) = unwrapped else { return [:] }
        var fields: [String: DBusValue] = [:]
        for entry in entries { if case .string(let key) = entry.key { fields[key] = entry.value.unwrapped } }
        return fields
    }

    /// The elements of an array.
    var elements: [DBusValue] {
        if case .array(_, let values) = unwrapped { return values }
        return []
    }
}
