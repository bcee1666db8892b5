#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

extension DBusConnection.Bus: CustomStringConvertible {
    /// `the system bus`, `the session bus`, `the bus at unix:path=/tmp/bus`: for messages that say where.
    public var description: String {
        switch self {
        case .system: "the system bus"
        case .session: "the session bus"
        case .address(let address): "the bus at \(address)"
        }
    }

    /// ``description`` with the address libdbus will really use for the system bus (`DBUS_SYSTEM_BUS_ADDRESS`,
    /// else the standard socket), as an operator would look for it when the bus does not answer.
    public var resolvedDescription: String {
        guard case .system = self else { return description }
        if let address = getenv("DBUS_SYSTEM_BUS_ADDRESS") {
            return "the system bus (DBUS_SYSTEM_BUS_ADDRESS=\(String(cString: address)))"
        }
        return "the system bus (unix:path=/var/run/dbus/system_bus_socket)"
    }
}
