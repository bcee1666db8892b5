import KeepAlive
import Polling
import Testing

@Suite("Bluetooth UUIDs and small types")
struct BluetoothUUIDTests {
    @Test(arguments: [
        "2a19", "2A19", "0x2A19", "00002a19", "00002A19-0000-1000-8000-00805F9B34FB",
        "00002a1900001000800000805f9b34fb",
    ])
    func sixteenThirtyTwoAndFullFormsAreTheSameUUID(_ text: String) throws {
        let uuid = try BluetoothUUID(text)
        #expect(uuid == BluetoothUUID(assigned: 0x2A19))
        #expect(uuid.description == "00002a19-0000-1000-8000-00805f9b34fb")
        #expect(uuid.shortDescription == "2a19")
    }

    @Test func thirtyTwoBitAndVendorUUIDsKeepTheirForm() throws {
        #expect(try BluetoothUUID("12345678").shortDescription == "12345678")
        let vendor = try BluetoothUUID("6E400001-B5A3-F393-E0A9-E50E24DCCA9E")
        #expect(vendor.shortDescription == "6e400001-b5a3-f393-e0a9-e50e24dcca9e")
    }

    @Test func bytesOrderAndAssignedNumbersFollowTheBits() throws {
        let vendor = try BluetoothUUID("6E400001-B5A3-F393-E0A9-E50E24DCCA9E")
        #expect(
            vendor.bytes == [
                0x6E, 0x40, 0x00, 0x01, 0xB5, 0xA3, 0xF3, 0x93, 0xE0, 0xA9, 0xE5, 0x0E, 0x24, 0xDC, 0xCA, 0x9E,
            ])
        #expect(
            BluetoothUUID(assigned: 0x2A19).bytes == [
                0, 0, 0x2A, 0x19, 0, 0, 0x10, 0, 0x80, 0, 0, 0x80, 0x5F, 0x9B, 0x34, 0xFB,
            ])
        #expect(BluetoothUUID(assigned: 0x2A19).assignedNumber == 0x2A19)
        #expect(try BluetoothUUID("12345678").assignedNumber == nil)
        #expect(vendor.assignedNumber == nil)
        #expect(
            try BluetoothUUID("00002a19-0000-1000-8000-00805f9b34fc").shortDescription
                == "00002a19-0000-1000-8000-00805f9b34fc")
        // Ordered as the bytes are, most significant first: the high half decides, then the low half.
        let ordered = try [
            "00002a19", "00002a1a", "12345678", "6e400001-b5a3-f393-e0a9-e50e24dcca9e",
            "6e400001-b5a3-f393-e0a9-e50e24dcca9f", "ffffffff",
        ]
        .map { try BluetoothUUID($0) }
        #expect(ordered.shuffled().sorted() == ordered)
        #expect(ordered.sorted() == ordered.sorted { $0.bytes.lexicographicallyPrecedes($1.bytes) })
    }

    @Test(arguments: ["", "2a1", "2a1g", "0000-2a19", "00002a19-0000-1000-8000_00805f9b34fb", "zz", "2a19 "])
    func badUUIDsAreErrorsThatQuoteTheInput(_ text: String) {
        #expect {
            try BluetoothUUID(text)
        } throws: { error in
            guard let error = error as? BluetoothUUID.ParseError else { return false }
            return error.input == text && "\(error)".contains("\"\(text)\"")
        }
    }

    /// BlueZ's object cache keeps a GATT object compactly only when its UUID reads back as the same string: the
    /// fast reader must accept exactly `description`'s form and nothing else.
    @Test(arguments: [
        ("00002a19-0000-1000-8000-00805f9b34fb", true), ("6e400001-b5a3-f393-e0a9-e50e24dcca9e", true),
        ("00000000-0000-0000-0000-000000000000", true), ("ffffffff-ffff-ffff-ffff-ffffffffffff", true),
        ("00002A19-0000-1000-8000-00805F9B34FB", false), ("2a19", false), ("00002a1900001000800000805f9b34fb", false),
        ("00002a19-0000-1000-8000_00805f9b34fb", false), ("00002a19-0000-1000-8000-00805f9b34f", false),
        ("00002a19-0000-1000-8000-00805f9b34fbb", false), ("0000-2a19-0000-1000-800000805f9b34fb", false),
        ("00002a19-0000-1000-8000-00805f9b34fg", false), ("", false),
    ])
    func theExactDescriptionFormIsReadAndNothingElse(_ text: String, accepted: Bool) throws {
        let fast = BluetoothUUID(exactDescription: text)
        let slow = (try? BluetoothUUID(text)).flatMap { $0.description == text ? $0 : nil }
        #expect(fast == slow)
        #expect((fast != nil) == accepted)
        if let fast { #expect(fast.description == text) }
    }

    @Test func transportErrorCodesCarryTheirRetryClass() {
        let transient: [TransportError.Code] = [
            .connectionAborted, .connectionCanceled, .inProgress, .notReady, .notConnected, .timeout,
            .serviceRestarted, .deviceVanished, .deviceNotFound, .ioError, .serviceUnavailable, .adapterUnavailable,
        ]
        let permanent: [TransportError.Code] = [
            .notSupported, .notPermitted, .doesNotExist, .characteristicNotFound, .invalidArguments, .attError,
            .protocolError, .adapterNotFound, .accessDenied,
        ]
        #expect(transient.allSatisfy { $0.retry == .transient })
        #expect(permanent.allSatisfy { $0.retry == .permanent })
        let error = TransportError(
            .connectionAborted, "le-connection-abort-by-local", dbusName: "org.bluez.Error.Failed")
        #expect(error.isTransient)
        #expect("\(error)" == "connectionAborted: le-connection-abort-by-local [org.bluez.Error.Failed]")
    }

    @Test func retryPolicyFollowsTheGrowingSchedule() {
        let policy = RetryPolicy(maxAttempts: 8)
        let delays = (1...8).map { policy.delay(afterAttempt: $0) }
        #expect(
            delays == [
                .milliseconds(100), .milliseconds(250), .milliseconds(500), .seconds(1), .seconds(2), .seconds(2),
                .seconds(2), nil,
            ])
        #expect(RetryPolicy.never.delay(afterAttempt: 1) == nil)
    }

    @Test func lowPowerPolicyStretchesAndPauses() {
        let policy = LowPowerPolicy()
        #expect(policy.effectiveInterval(.seconds(30), in: .normal) == .seconds(30))
        #expect(policy.effectiveInterval(.seconds(30), in: .lowPower) == .seconds(60))
        #expect(policy.effectiveInterval(.seconds(30), in: .critical) == nil)
        #expect(
            LowPowerPolicy(lowPowerMultiplier: 1.5, critical: .stretch(4)).effectiveInterval(
                .seconds(30), in: .critical) == .seconds(120))
    }

    @Test func peripheralSpecListsEachCharacteristicOnce() throws {
        let battery = BluetoothUUID(assigned: 0x2A19)
        let spec = PeripheralSpec(
            name: "x",
            peripheral: Peripheral(address: "aa:bb:cc:dd:ee:ff", adapter: "hci0"),
            writes: [.init(characteristic: battery, value: [1])],
            reads: [battery],
            notifications: [.init(characteristic: battery, duration: .seconds(1))]
        )
        #expect(spec.characteristics == [battery])
        #expect(spec.peripheral.address == "AA:BB:CC:DD:EE:FF")
    }
}
