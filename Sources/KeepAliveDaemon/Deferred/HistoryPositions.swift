import Basics
import Logging

#if canImport(Glibc)
    import Glibc
#endif

/// How far each device's history has been published: one small JSON file in the state directory, replaced
/// atomically after each published entry, so that a restart or a broken link neither publishes an hour twice nor
/// skips one. A kill between an entry's record and its save publishes that entry again, with the same time
/// (`HistoryDownload.continuing`): the record is out before its save, as losing it would be worse.
///
/// ```json
/// {"version":1,"devices":{"fern":{"next":43,"device_timestamp":2156400,"measured_ms":1764393600000,"last_valid":42}}}
/// ```
///
/// `next` is the index of the first entry not yet published; `last_valid` the index of the last entry published
/// that could be read (an entry the sensor answered with garbage is published as a failure and passed); its
/// `device_timestamp`, its time on the device's clock, proves at the next download that the device still holds the
/// same entries there (a sensor whose battery was changed starts a new history from index 0); `measured_ms` its
/// time on the gateway's clock, which places the next entries and says, after such a restart, which of the new
/// history's entries are newer than what was published. A file without `last_valid` (written before it was kept)
/// reads as `next - 1`.
final class HistoryPositions: Sendable {
    struct Position: Sendable, Hashable {
        var next: Int
        var deviceTimestamp: UInt32
        /// Since the Unix epoch.
        var measured: Duration
        /// The last entry published that could be read, -1 for none.
        var lastValid: Int
    }

    let path: String
    private let positions: Locked<[String: Position]>

    /// Reads `path`; a file that cannot be read is moved aside (logged), and every device starts from its oldest
    /// entry that is newer than nothing, i.e. from the start.
    init(path: String, logger: Logger) {
        self.path = path
        var loaded: [String: Position] = [:]
        do {
            loaded = try Self.load(path)
        } catch {
            let aside = path + ".corrupt"
            let moved = rename(path, aside) == 0
            logger.error(
                """
                history positions: \(error)\(moved ? "; moved aside to \(aside)" : ""): each device's history is \
                downloaded again from its oldest entry
                """)
        }
        positions = Locked(loaded)
    }

    subscript(device: String) -> Position? {
        positions.withLock { $0[device] }
    }

    /// Records `position` for `device` and writes the file before returning.
    func save(_ position: Position, for device: String) throws(AtomicFile.Failure) {
        // Written under the lock: two saves at once would share the temporary file.
        let failure = positions.withLock { positions -> AtomicFile.Failure? in
            positions[device] = position
            do throws(AtomicFile.Failure) {
                try AtomicFile.replace(path, with: Self.encode(positions))
                return nil
            } catch {
                return error
            }
        }
        if let failure { throw failure }
    }

    private static func encode(_ positions: [String: Position]) -> [UInt8] {
        var document = JSONObject()
        document.integer("version", 1)
        document.object("devices") { devices in
            for (device, position) in positions.sorted(by: { $0.key < $1.key }) {
                devices.object(device) { object in
                    object.integer("next", position.next)
                    object.integer("device_timestamp", UInt64(position.deviceTimestamp))
                    object.integer("measured_ms", position.measured.milliseconds)
                    object.integer("last_valid", position.lastValid)
                }
            }
        }
        return document.bytes + [0x0A]
    }

    private static func load(_ path: String) throws -> [String: Position] {
        guard let bytes = try AtomicFile.read(path) else { return [:] }
        let document = try JSONParser.parse(bytes, anyNumber: false, maximumBytes: AtomicFile.limit)
        guard document["version"]?.integerValue == 1, case .object(let devices)? = document["devices"] else {
            throw AtomicFile.Failure(path: path, "not a history position list of version 1")
        }
        var positions: [String: Position] = [:]
        for (device, value) in devices {
            guard let next = value["next"]?.integerValue, next >= 0,
                let timestamp = value["device_timestamp"]?.integerValue, let stamp = UInt32(exactly: timestamp),
                let measured = value["measured_ms"]?.integerValue
            else {
                throw AtomicFile.Failure(path: path, "devices.\(device): needs next, device_timestamp and measured_ms")
            }
            let lastValid = value["last_valid"]?.integerValue ?? Int64(next) - 1
            guard lastValid >= -1, lastValid < next else {
                throw AtomicFile.Failure(
                    path: path, "devices.\(device): last_valid \(lastValid) is not below next \(next)")
            }
            positions[device] = Position(
                next: Int(next), deviceTimestamp: stamp, measured: .milliseconds(measured), lastValid: Int(lastValid))
        }
        return positions
    }
}
