import LibCrypto
public import Readings

// What passive sensors put in their advertisements, as bytes: the encoders the simulator's advertising devices use.
// Pure functions (the cipher aside, which is the project's LibCrypto, never AES of our own). Written from the
// formats' own documents, not from the decoders in Sources/Readings, so that a constant wrong in one is caught by
// the round trip through the other (Tests/BlueZSimulatorTests/AdvertisementEncoderTests.swift).

/// One measurement of a simulated passive sensor, in the units people use.
public struct SimulatedMeasurement: Sendable, Hashable {
    public var celsius: Double
    /// Relative humidity, %.
    public var humidity: Double
    /// Battery, %.
    public var battery: UInt8
    /// Battery voltage, mV.
    public var millivolts: UInt16
    /// Air pressure, hPa (Ruuvi).
    public var pressure: Double
    /// Acceleration in mG (Ruuvi).
    public var accelerationX: Int16
    public var accelerationY: Int16
    public var accelerationZ: Int16
    /// Transmit power, dBm (Ruuvi: −40 to +20 in 2 dBm steps).
    public var txPower: Int8
    /// Movements counted (Ruuvi).
    public var movements: UInt8

    public init(
        celsius: Double = 21.5, humidity: Double = 45.5, battery: UInt8 = 88, millivolts: UInt16 = 2_950,
        pressure: Double = 1_013.25, accelerationX: Int16 = -12, accelerationY: Int16 = 20,
        accelerationZ: Int16 = 1_004, txPower: Int8 = 4, movements: UInt8 = 0
    ) {
        self.celsius = celsius
        self.humidity = humidity
        self.battery = battery
        self.millivolts = millivolts
        self.pressure = pressure
        self.accelerationX = accelerationX
        self.accelerationY = accelerationY
        self.accelerationZ = accelerationZ
        self.txPower = txPower
        self.movements = movements
    }
}

/// Encoders for the advertisement formats of passive sensors. Every function takes the device's address as six
/// bytes in written order (`A4:C1:38:AA:BB:CC` is `A4 C1 38 AA BB CC`) and returns the bytes BlueZ reports as the
/// value of `ServiceData` (after the 16-bit UUID) or `ManufacturerData` (after the company identifier).
public enum AdvertisementEncoder {
    /// BTHome's service UUID, 0xFCD2, as BlueZ keys `ServiceData`.
    public static let bthomeUUID = SimulatedUUID.full("fcd2")
    /// pvvx's format travels under Environmental Sensing, 0x181A.
    public static let pvvxUUID = SimulatedUUID.full("181a")
    /// Xiaomi's MiBeacon service, 0xFE95.
    public static let miBeaconUUID = SimulatedUUID.full("fe95")
    /// Ruuvi Innovations' company identifier.
    public static let ruuviCompanyID: UInt16 = 0x0499
    /// The LYWSD03MMC's MiBeacon product id.
    public static let lywsd03mmcProductID: UInt16 = 0x055B

    // MARK: BTHome v2 (bthome.io/format, bthome.io/encryption)

    /// BTHome's objects for a measurement, in ascending id order as the format asks: packet id (0x00), battery
    /// (0x01, %), temperature (0x02, 0.01 °C), humidity (0x03, 0.01 %), voltage (0x0C, mV).
    static func bthomeObjects(_ measurement: SimulatedMeasurement, packetID: UInt8) -> [UInt8] {
        var bytes: [UInt8] = [0x00, packetID, 0x01, measurement.battery, 0x02]
        bytes += littleEndian(UInt16(bitPattern: hundredths(measurement.celsius)))
        bytes.append(0x03)
        bytes += littleEndian(UInt16(clamping: Int((measurement.humidity * 100).rounded())))
        bytes.append(0x0C)
        bytes += littleEndian(measurement.millivolts)
        return bytes
    }

    /// BTHome v2, plain: the device information byte 0x40 (version 2, not encrypted, regular interval), then the
    /// objects.
    public static func bthome(_ measurement: SimulatedMeasurement, packetID: UInt8) -> [UInt8] {
        [0x40] + bthomeObjects(measurement, packetID: packetID)
    }

    /// BTHome v2, encrypted with AES-128-CCM and a 4-byte MIC: the device information byte 0x41, the ciphertext
    /// of the objects, the counter (4 bytes, little endian), the MIC. The nonce is the address (written order) ‖
    /// `D2 FC` ‖ the device information byte ‖ the counter; there is no associated data.
    public static func bthomeEncrypted(
        _ measurement: SimulatedMeasurement, packetID: UInt8, counter: UInt32, key: [UInt8], address: [UInt8]
    ) throws(AESCCMError) -> [UInt8] {
        let information: UInt8 = 0x41
        let counterBytes = littleEndian(counter)
        let nonce = address + [0xD2, 0xFC, information] + counterBytes
        let (ciphertext, tag) = try LibCryptoAESCCM().seal(
            plaintext: bthomeObjects(measurement, packetID: packetID), key: key, nonce: nonce, tagLength: 4)
        return [information] + ciphertext + counterBytes + tag
    }

    // MARK: pvvx (ATC_MiThermometer README, "Bluetooth Advertising Formats", custom format)

    /// pvvx's custom format, 15 bytes, little endian: the address (least significant byte first), temperature
    /// (sint16, 0.01 °C), humidity (uint16, 0.01 %), battery voltage (uint16, mV), battery (%), the measurement
    /// count, flags.
    public static func pvvx(
        _ measurement: SimulatedMeasurement, count: UInt8, flags: UInt8 = 0, address: [UInt8]
    ) -> [UInt8] {
        var bytes = address.reversed() as [UInt8]
        bytes += littleEndian(UInt16(bitPattern: hundredths(measurement.celsius)))
        bytes += littleEndian(UInt16(clamping: Int((measurement.humidity * 100).rounded())))
        bytes += littleEndian(measurement.millivolts)
        bytes += [measurement.battery, count, flags]
        return bytes
    }

    // MARK: MiBeacon v5 (Xiaomi "Mijia BLE MiBeacon protocol v5")

    /// MiBeacon v5, encrypted with the bind key, as a LYWSD03MMC sends it: frame control `58 58` (version 5,
    /// encrypted, address and objects included), the product id, the frame counter (the counter's low byte), the
    /// address (least significant byte first), the ciphertext of a temperature object (0x1004, sint16, 0.1 °C) and
    /// a humidity object (0x1006, uint16, 0.1 %), the counter's three high bytes and a 4-byte MIC. The nonce is the
    /// address (least significant first) ‖ product id ‖ frame counter ‖ the three counter bytes; the associated
    /// data is `11`.
    public static func miBeacon(
        _ measurement: SimulatedMeasurement, counter: UInt32, key: [UInt8], address: [UInt8],
        productID: UInt16 = lywsd03mmcProductID
    ) throws(AESCCMError) -> [UInt8] {
        let head: [UInt8] = [0x58, 0x58] + littleEndian(productID) + [UInt8(truncatingIfNeeded: counter)]
        let reversedAddress = address.reversed() as [UInt8]
        let high = Array(littleEndian(counter)[1...])
        var objects: [UInt8] = [0x04, 0x10, 2]
        objects += littleEndian(UInt16(bitPattern: Int16(clamping: Int((measurement.celsius * 10).rounded()))))
        objects += [0x06, 0x10, 2]
        objects += littleEndian(UInt16(clamping: Int((measurement.humidity * 10).rounded())))
        let nonce = reversedAddress + Array(head[2...]) + high
        let (ciphertext, tag) = try LibCryptoAESCCM().seal(
            plaintext: objects, key: key, nonce: nonce, associatedData: [0x11], tagLength: 4)
        return head + reversedAddress + ciphertext + high + tag
    }

    // MARK: RuuviTag RAWv2 (docs.ruuvi.com, "Data format 5")

    /// RuuviTag data format 5, 24 bytes, most significant byte first: 5, temperature (0.005 °C), humidity
    /// (0.0025 %), pressure (Pa − 50 000), acceleration x, y, z (mG), power (battery mV − 1600 in 11 bits, then
    /// (tx power + 40) / 2 in 5 bits), the movement counter, the measurement sequence, the address (written order).
    public static func ruuviRAWv2(_ measurement: SimulatedMeasurement, sequence: UInt16, address: [UInt8]) -> [UInt8] {
        var bytes: [UInt8] = [0x05]
        bytes += bigEndian(UInt16(bitPattern: Int16(clamping: Int((measurement.celsius / 0.005).rounded()))))
        bytes += bigEndian(UInt16(clamping: Int((measurement.humidity / 0.0025).rounded())))
        bytes += bigEndian(UInt16(clamping: Int((measurement.pressure * 100).rounded()) - 50_000))
        bytes += bigEndian(UInt16(bitPattern: measurement.accelerationX))
        bytes += bigEndian(UInt16(bitPattern: measurement.accelerationY))
        bytes += bigEndian(UInt16(bitPattern: measurement.accelerationZ))
        let voltage = UInt16(clamping: min(Int(measurement.millivolts) - 1_600, 0x7FE).clamped(atLeast: 0))
        let power = UInt16(clamping: ((Int(measurement.txPower) + 40) / 2).clamped(atLeast: 0))
        bytes += bigEndian(voltage << 5 | min(power, 0x1E))
        bytes.append(measurement.movements)
        bytes += bigEndian(sequence)
        bytes += address
        return bytes
    }

    // MARK: Helpers

    /// `AA:BB:CC:DD:EE:FF` as six bytes in written order; nil when it is not an address.
    public static func addressBytes(_ address: String) -> [UInt8]? {
        let parts = address.split(separator: ":", omittingEmptySubsequences: false)
        guard parts.count == 6 else { return nil }
        var bytes: [UInt8] = []
        for part in parts {
            guard part.count == 2, let byte = UInt8(part, radix: 16) else { return nil }
            bytes.append(byte)
        }
        return bytes
    }

    /// Sixteen bytes as 32 lower-case hexadecimal digits, the way keys are written in configurations.
    public static func hex(_ bytes: [UInt8]) -> String {
        bytes.map { byte in
            let digits = String(byte, radix: 16)
            return byte < 0x10 ? "0" + digits : digits
        }.joined()
    }

    /// 32 hexadecimal digits as 16 bytes (a key); nil otherwise.
    public static func keyBytes(_ hex: String) -> [UInt8]? {
        let digits = Array(hex.utf8)
        guard digits.count == 32 else { return nil }
        var bytes: [UInt8] = []
        for index in stride(from: 0, to: 32, by: 2) {
            guard let byte = UInt8(String(decoding: digits[index..<index + 2], as: UTF8.self), radix: 16) else {
                return nil
            }
            bytes.append(byte)
        }
        return bytes
    }

    private static func hundredths(_ value: Double) -> Int16 {
        Int16(clamping: Int((value * 100).rounded()))
    }

    private static func littleEndian(_ value: UInt16) -> [UInt8] {
        [UInt8(value & 0xFF), UInt8(value >> 8)]
    }

    private static func littleEndian(_ value: UInt32) -> [UInt8] {
        (0..<4).map { UInt8(truncatingIfNeeded: value >> (8 * UInt32($0))) }
    }

    private static func bigEndian(_ value: UInt16) -> [UInt8] {
        [UInt8(value >> 8), UInt8(value & 0xFF)]
    }
}

extension Int {
    fileprivate func clamped(atLeast minimum: Int) -> Int { Swift.max(self, minimum) }
}
