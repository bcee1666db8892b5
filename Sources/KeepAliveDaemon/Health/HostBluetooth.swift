internal import CBluetooth

#if canImport(Glibc)
internal import Glibc
#endif

/// What libbluetooth knows without D-Bus: address syntax, company names, and the kernel's HCI controllers.
/// Every raw libbluetooth call of the daemon lives in this file.
public enum HostBluetooth {
    /// Whether `address` is a Bluetooth address `AA:BB:CC:DD:EE:FF` (either case), by libbluetooth's `bachk`.
    public static func isValidAddress(_ address: String) -> Bool {
        // bachk reads a C string: an embedded NUL would hide whatever follows it, so the length comes first.
        address.utf8.count == 17 && !address.utf8.contains(0) && bachk(address) == 0
    }

    /// Whether `name` is an adapter name as BlueZ spells them under `/org/bluez`: `hci` and a number (`hci0`).
    public static func isValidAdapter(_ name: String) -> Bool {
        let number = name.utf8.dropFirst(3)
        return name.hasPrefix("hci") && !number.isEmpty && number.count <= 5
            && number.allSatisfy { $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") }
    }

    /// The Bluetooth SIG company name for a manufacturer id (`bt_compidtostr`), or `nil` when libbluetooth does
    /// not know it.
    public static func companyName(_ identifier: UInt16) -> String? {
        guard let name = bt_compidtostr(Int32(identifier)) else { return nil }
        let text = String(cString: name)
        return text == "internal use" || text.isEmpty ? nil : text
    }

    /// One HCI controller as the kernel sees it (`hci_dev_info`).
    public struct Controller: Sendable, Hashable {
        public var identifier: Int
        public var name: String
        public var address: String
        public var isUp: Bool
    }

    /// Why the kernel's controllers could not be listed.
    public struct ControllerListError: Error, Sendable, Hashable, CustomStringConvertible {
        public var errno: Int32
        public var description: String {
            let reason = String(cString: strerror(errno))
            switch errno {
            case EAFNOSUPPORT:
                return "the kernel has no Bluetooth support (socket(AF_BLUETOOTH) failed: errno \(errno), \(reason)): "
                    + "load the `bluetooth` module or use a kernel built with CONFIG_BT"
            case EPERM, EACCES:
                return "not allowed to open an HCI socket (errno \(errno), \(reason))"
            default:
                return "listing HCI controllers failed: errno \(errno), \(reason)"
            }
        }
    }

    /// The controllers the kernel has (`HCIGETDEVLIST` + `HCIGETDEVINFO`).
    public static func controllers() -> Result<[Controller], ControllerListError> {
        var infos = [hci_dev_info](repeating: hci_dev_info(), count: Int(HCI_MAX_DEV))
        let count = infos.withUnsafeMutableBufferPointer { buffer in
            cbluetooth_device_list(buffer.baseAddress, Int32(buffer.count))
        }
        guard count >= 0 else { return .failure(ControllerListError(errno: errno)) }
        return .success(
            infos.prefix(Int(count)).map { info in
                var info = info
                let name = withUnsafeBytes(of: &info.name) { raw in
                    String(decoding: raw.prefix { $0 != 0 }, as: UTF8.self)
                }
                return Controller(
                    identifier: Int(info.dev_id),
                    name: name,
                    address: addressString(info.bdaddr),
                    isUp: cbluetooth_device_is_up(&info) != 0
                )
            }
        )
    }

    /// `ba2str`: a `bdaddr_t` as `AA:BB:CC:DD:EE:FF`.
    static func addressString(_ address: bdaddr_t) -> String {
        var address = address
        var buffer = [CChar](repeating: 0, count: 18)
        _ = buffer.withUnsafeMutableBufferPointer { ba2str(&address, $0.baseAddress) }
        return String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }
}
