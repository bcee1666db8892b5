import DBus
import KeepAlive
import Polling

#if canImport(Glibc)
    import Glibc
#endif

/// What the hardware-in-the-loop suite tests, read only from the environment so that one suite runs against the
/// simulator (`make hil`), the qemu lab's real bluetoothd (`make lab`) and real hardware (README, "Hardware in the
/// loop").
///
/// ```sh
/// KEEPALIVE_HIL_BUS=system KEEPALIVE_HIL_PERIPHERAL=C0:FF:EE:00:00:01 swift test --filter HILTests
/// ```
struct HILEnvironment: Sendable {
    /// `KEEPALIVE_HIL_BUS`: `system`, or a D-Bus address (`unix:path=…`, `tcp:host=…,port=…`). Unset: skip.
    var bus: DBusConnection.Bus
    var busName: String
    /// `KEEPALIVE_HIL_ADAPTER` (default `hci0`): the central.
    var adapter: String
    /// `KEEPALIVE_HIL_PERIPHERAL`: the peripheral under test, as the central sees it.
    var peripheral: Peripheral
    /// `KEEPALIVE_HIL_COUNTER_UUID`: a UInt32 little-endian counter that can be read and notifies (+1 each).
    var counter: BluetoothUUID
    /// `KEEPALIVE_HIL_SETTING_UUID`: a characteristic that can be written (request and command) and read back.
    var setting: BluetoothUUID
    /// `KEEPALIVE_HIL_ABSENT_ADDRESS`: an address nothing advertises.
    var absent: Peripheral
    /// `KEEPALIVE_HIL_PERIPHERAL_OFF` / `_ON` / `KEEPALIVE_HIL_RESTART_BLUETOOTHD`: shell commands injecting the
    /// faults the environment can produce; each fault's test is skipped without its command.
    var peripheralOff: String?
    var peripheralOn: String?
    var restartBluetoothd: String?
    /// `KEEPALIVE_HIL_STOP_BLUETOOTHD`: a shell command that stops bluetoothd for the seconds appended to it, then
    /// starts it again, returning once it has stopped.
    var stopBluetoothd: String?
    /// `KEEPALIVE_HIL_ADAPTER_FAULTS=1`: the suite may power the central adapter off behind the daemon's back
    /// (the healing tests); not on a machine whose adapter others use.
    var adapterFaults: Bool
    /// `KEEPALIVE_HIL_TICKS` (default 4): ticks of the daemon's end-to-end run.
    var ticks: Int
    /// `KEEPALIVE_HIL_CONNECT_TIMEOUT` (seconds, default 20): each connect's own deadline.
    var connectTimeout: Duration

    static let counterDefault = "4b410002-6b65-6570-616c-697665000000"
    static let settingDefault = "4b410003-6b65-6570-616c-697665000000"

    /// The environment of this process; nil when `KEEPALIVE_HIL_BUS` is unset; a mistake is reported with the
    /// variable's name by ``load()``.
    static let current: Result<HILEnvironment, HILEnvironmentError>? = {
        guard variable("KEEPALIVE_HIL_BUS") != nil else { return nil }
        return Result { () throws(HILEnvironmentError) in try parse(variable) }
    }()

    static var isGiven: Bool { current != nil }

    /// The environment, or a failure naming the variable that is wrong.
    static func load() throws -> HILEnvironment {
        guard let current else { throw HILEnvironmentError("KEEPALIVE_HIL_BUS is not set") }
        return try current.get()
    }

    static func variable(_ name: String) -> String? {
        guard let value = getenv(name) else { return nil }
        let text = String(cString: value)
        return text.isEmpty ? nil : text
    }

    static func parse(_ lookup: (String) -> String?) throws(HILEnvironmentError) -> HILEnvironment {
        let busText = lookup("KEEPALIVE_HIL_BUS") ?? ""
        let bus: DBusConnection.Bus =
            switch busText {
            case "system": .system
            case "session": .session
            default: .address(busText)
            }
        guard busText == "system" || busText == "session" || busText.contains(":") else {
            throw HILEnvironmentError(
                "KEEPALIVE_HIL_BUS=\(busText): not 'system' or a D-Bus address such as tcp:host=127.0.0.1,port=4711")
        }
        let adapter = lookup("KEEPALIVE_HIL_ADAPTER") ?? "hci0"
        guard let address = lookup("KEEPALIVE_HIL_PERIPHERAL") else {
            throw HILEnvironmentError("KEEPALIVE_HIL_PERIPHERAL is not set: the address of the peripheral under test")
        }
        func checkedAddress(_ name: String, _ text: String) throws(HILEnvironmentError) -> Peripheral {
            let octets = text.split(separator: ":", omittingEmptySubsequences: false)
            guard octets.count == 6, octets.allSatisfy({ $0.count == 2 && $0.allSatisfy(\.isHexDigit) }) else {
                throw HILEnvironmentError("\(name)=\(text): not a Bluetooth address (AA:BB:CC:DD:EE:FF)")
            }
            return Peripheral(address: text, adapter: adapter)
        }
        func uuid(_ name: String, default fallback: String) throws(HILEnvironmentError) -> BluetoothUUID {
            let text = lookup(name) ?? fallback
            do { return try BluetoothUUID(text) } catch {
                throw HILEnvironmentError("\(name)=\(text): not a 16-, 32- or 128-bit UUID")
            }
        }
        func positive(_ name: String, default fallback: Int) throws(HILEnvironmentError) -> Int {
            guard let text = lookup(name) else { return fallback }
            guard let value = Int(text), value > 0 else {
                throw HILEnvironmentError("\(name)=\(text): not a positive whole number")
            }
            return value
        }
        return HILEnvironment(
            bus: bus,
            busName: busText,
            adapter: adapter,
            peripheral: try checkedAddress("KEEPALIVE_HIL_PERIPHERAL", address),
            counter: try uuid("KEEPALIVE_HIL_COUNTER_UUID", default: counterDefault),
            setting: try uuid("KEEPALIVE_HIL_SETTING_UUID", default: settingDefault),
            absent: try checkedAddress(
                "KEEPALIVE_HIL_ABSENT_ADDRESS", lookup("KEEPALIVE_HIL_ABSENT_ADDRESS") ?? "C0:FF:EE:DE:AD:01"),
            peripheralOff: lookup("KEEPALIVE_HIL_PERIPHERAL_OFF"),
            peripheralOn: lookup("KEEPALIVE_HIL_PERIPHERAL_ON"),
            restartBluetoothd: lookup("KEEPALIVE_HIL_RESTART_BLUETOOTHD"),
            stopBluetoothd: lookup("KEEPALIVE_HIL_STOP_BLUETOOTHD"),
            adapterFaults: lookup("KEEPALIVE_HIL_ADAPTER_FAULTS") == "1",
            ticks: try positive("KEEPALIVE_HIL_TICKS", default: 4),
            connectTimeout: .seconds(try positive("KEEPALIVE_HIL_CONNECT_TIMEOUT", default: 20))
        )
    }
}

struct HILEnvironmentError: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}
