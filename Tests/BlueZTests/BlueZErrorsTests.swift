@testable import BlueZ
import DBus
import KeepAlive
import Polling
import Testing

@Suite("BlueZ error mapping")
struct BlueZErrorsTests {
    static let cases: [(name: String, message: String, code: TransportError.Code)] = [
        ("org.bluez.Error.Failed", "le-connection-abort-by-local", .connectionAborted),
        ("org.bluez.Error.Failed", "br-connection-canceled", .connectionCanceled),
        ("org.bluez.Error.Failed", "Operation already in progress", .inProgress),
        ("org.bluez.Error.Failed", "Input/output error", .ioError),
        ("org.bluez.Error.Failed", "Not connected", .notConnected),
        ("org.bluez.Error.Failed", "Software caused connection abort", .ioError),
        ("org.bluez.Error.Failed", "No discovery started", .notReady),
        ("org.bluez.Error.Failed", "No notify session started", .notReady),
        ("org.bluez.Error.Failed", "Operation failed with ATT error: 0x0e", .attError),
        ("org.bluez.Error.Failed", "something new", .failed),
        ("org.bluez.Error.InProgress", "In Progress", .inProgress),
        ("org.bluez.Error.NotReady", "Resource Not Ready", .notReady),
        ("org.bluez.Error.NotSupported", "Operation is not supported", .notSupported),
        ("org.bluez.Error.NotPermitted", "Read not permitted", .notPermitted),
        ("org.bluez.Error.NotAuthorized", "Operation Not Authorized", .notPermitted),
        ("org.bluez.Error.InvalidArguments", "Invalid arguments in method call", .invalidArguments),
        ("org.bluez.Error.DoesNotExist", "Does Not Exist", .doesNotExist),
        ("org.freedesktop.DBus.Error.UnknownObject", "Method \"ReadValue\" … doesn't exist", .deviceVanished),
        (
            "org.freedesktop.DBus.Error.ServiceUnknown", "The name org.bluez was not provided by any .service files",
            .serviceUnavailable
        ),
        ("org.freedesktop.DBus.Error.NoReply", "Did not receive a reply", .timeout),
        (
            "org.freedesktop.DBus.Error.NoReply", "Message recipient disconnected from message bus without replying",
            .serviceRestarted
        ),
        ("org.freedesktop.DBus.Error.UnknownMethod", "No such method", .protocolError),
        ("org.freedesktop.DBus.Error.AccessDenied", "Rejected send message", .accessDenied),
    ]

    @Test(arguments: 0..<cases.count)
    func everyErrorBlueZSendsMapsToATypedCodeAndKeepsItsName(_ index: Int) {
        let (name, message, code) = Self.cases[index]
        let error = BlueZErrors.transportError(DBusError(name: name, message: message), context: "ReadValue 2a19")
        #expect(error.code == code, "\(name): \(message)")
        #expect(error.dbusName == name)
        #expect(error.message == "ReadValue 2a19: \(message)")
    }

    @Test func attErrorCarriesItsCode() {
        let error = BlueZErrors.transportError(
            DBusError(name: "org.bluez.Error.Failed", message: "Operation failed with ATT error: 0x0e"),
            context: "read"
        )
        #expect(error.attError == 0x0E)
        #expect(!error.isTransient)
    }

    @Test func localFailuresMapToo() {
        #expect(
            BlueZErrors.transportError(DBusError(code: .disconnected, message: "bus gone"), context: "x").code
                == .serviceUnavailable)
        #expect(
            BlueZErrors.transportError(
                DBusError(code: .timeout, name: "org.freedesktop.DBus.Error.NoReply", message: "t"), context: "x"
            ).code == .timeout)
        #expect(
            BlueZErrors.transportError(DBusError(code: .typeMismatch, message: "expected ay, found s"), context: "x")
                .code == .protocolError)
    }
}

@Suite("BlueZ object paths")
struct BlueZPathTests {
    @Test(
        arguments: [
            (
                "/org/bluez/hci0/dev_C0_FF_EE_00_00_01/service0010/char0011/desc0013",
                "/org/bluez/hci0/dev_C0_FF_EE_00_00_01"
            ),
            ("/org/bluez/hci0/dev_C0_FF_EE_00_00_01/service0010", "/org/bluez/hci0/dev_C0_FF_EE_00_00_01"),
            ("/org/bluez/hci12/dev_C0_FF_EE_00_00_01", "/org/bluez/hci12/dev_C0_FF_EE_00_00_01"),
            ("/org/bluez/hci0", nil),
            ("/org/bluez/hci0/dev_", "/org/bluez/hci0/dev_"),
            ("/org/bluez/hci0/dev", nil),
            ("/org/bluez/hci0/devX_C0", nil),
            ("/org/bluez/hci0/service0010/dev_C0", nil),
            ("/org/bluez", nil),
            ("/org/bluez/hci0/player0", nil),
            ("/org/bluezz/hci0/dev_C0_FF_EE_00_00_01", nil),
            ("/", nil),
        ] as [(String, String?)])
    func aGATTObjectBelongsToTheDeviceAboveIt(path: String, device: String?) throws {
        #expect(BlueZ.deviceOwning(try ObjectPath(path))?.rawValue == device)
    }

    @Test(
        "a device's path comes from its address, in upper case",
        arguments: [
            ("C0:FF:EE:00:00:01", "hci0", "/org/bluez/hci0/dev_C0_FF_EE_00_00_01"),
            ("c0:ff:ee:0a:bc:d1", "hci1", "/org/bluez/hci1/dev_C0_FF_EE_0A_BC_D1"),
        ])
    func aDevicePathComesFromTheAddress(address: String, adapter: String, path: String) throws {
        #expect(try BlueZ.devicePath(Peripheral(address: address, adapter: adapter)).rawValue == path)
        // `address` is a public var: one set in lower case after init gives the same path.
        var peripheral = Peripheral(address: "00:00:00:00:00:00", adapter: adapter)
        peripheral.address = address.lowercased()
        #expect(try BlueZ.devicePath(peripheral).rawValue == path)
    }

    @Test(
        "anything but six pairs of hex digits is not an address, and says which",
        arguments: [
            "C0:FF:EE:00:00", "C0:FF:EE:00:00:01:", "C0-FF-EE-00-00-01", "C0:FF:EE:00:00:0G", "C0:FF:EE:00:0:001",
            "C0:FF:EE:00:00:\u{FF11}", "", "C0FFEE000001xxxxx",
        ])
    func aMalformedAddressIsRefused(address: String) {
        let error = #expect(throws: TransportError.self) {
            try BlueZ.devicePath(Peripheral(address: address, adapter: "hci0"))
        }
        #expect(error?.code == .invalidArguments)
        // Peripheral keeps the address in upper case; the error quotes it as kept.
        #expect(error?.message.contains("\"\(address.uppercased())\" is not a Bluetooth address") == true)
    }
}
