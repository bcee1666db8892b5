/// Xiaomi MiBeacon versions 2 to 5, service data 0xFE95 ("Mijia BLE MiBeacon protocol v5" and "Mi Beacon v4", in
/// pvvx/ATC_MiThermometer's `InfoMijiaBLE/`).
///
/// The data: frame control (2 bytes), product id (2), frame counter (1), then as the frame control says: the
/// device's address (6, least significant first), a capability byte (and, when its bit 5 is set, 2 bytes of I/O
/// capability), objects (id 2, length 1, data), and for an encrypted frame the 3 high bytes of the 32-bit counter
/// and a 4-byte tag. Frame control: bit 3 encrypted, bit 4 address, bit 5 capability, bit 6 objects, bit 7 mesh,
/// bits 12–15 the version.
///
/// Encrypted (versions 4 and 5), the objects are AES-128-CCM ciphertext; the nonce is the address (least
/// significant first) ‖ the product id and frame counter as sent ‖ the 3 counter bytes, 12 bytes, and the
/// associated data is the one byte `0x11` (as xiaomi-ble and pvvx's firmware do). Versions 2 and 3 encrypt without
/// a tag, so a wrong key yields garbage that cannot be told from data: they are refused.
enum MiBeacon {
    /// The associated data of every encrypted MiBeacon, made once.
    static let associatedData: [UInt8] = [0x11]

    static func decode(
        _ bytes: [UInt8], device: Device, replayGuard: inout ReplayGuard
    ) throws(AdvertisementError) -> AdvertisementPayload {
        let address = device.address
        guard bytes.count >= 5 else {
            throw .truncated(
                .mibeacon, address, "the frame control, product id and frame counter", needs: 5, at: 0,
                has: bytes.count)
        }
        let frameControl = UInt16(bytes[0]) | UInt16(bytes[1]) << 8
        let version = Int(frameControl >> 12)
        guard (2...5).contains(version) else {
            throw AdvertisementError(
                .unsupportedVersion, .mibeacon, address,
                "frame control \(HexText.number(UInt64(frameControl), digits: 4)) says version \(version), this "
                    + "decoder reads versions 2 to 5")
        }
        guard frameControl & 0x80 == 0 else {
            throw AdvertisementError(
                .unsupportedFormat, .mibeacon, address, "a mesh MiBeacon (frame control bit 7), not decoded")
        }
        let isEncrypted = frameControl & 0x08 != 0
        let frameCounter = bytes[4]
        var payload = AdvertisementPayload(
            format: .mibeacon, readings: [], packetID: UInt32(frameCounter), isEncrypted: isEncrypted,
            productID: UInt16(bytes[2]) | UInt16(bytes[3]) << 8)
        var index = 5
        if frameControl & 0x10 != 0 {
            guard bytes.count >= index &+ 6 else {
                throw .truncated(.mibeacon, address, "the device's address", needs: 6, at: index, has: bytes.count)
            }
            let advertised = BluetoothAddress(bytes, at: index, order: .little)
            guard advertised == address else {
                throw AdvertisementError(
                    .addressMismatch, .mibeacon, address,
                    "the MiBeacon carries the address \(advertised): another device's advertisement, refused")
            }
            payload.advertisedAddress = advertised
            index &+= 6
        }
        if frameControl & 0x20 != 0 {
            guard index < bytes.count else {
                throw .truncated(.mibeacon, address, "the capability byte", needs: 1, at: index, has: bytes.count)
            }
            let capability = bytes[index]
            index &+= 1
            if capability & 0x20 != 0 {
                // The v5 document's I/O capability: 2 bytes (xiaomi-ble skips 1).
                guard bytes.count >= index &+ 2 else {
                    throw .truncated(
                        .mibeacon, address, "the I/O capability", needs: 2, at: index, has: bytes.count)
                }
                index &+= 2
            }
        }
        guard frameControl & 0x40 != 0 else {
            // No objects: the device only says it is there (pairing, a beacon between measurements).
            return payload
        }
        guard isEncrypted else {
            guard device.key == nil else {
                throw AdvertisementError(
                    .plainFromKeyedDevice, .mibeacon, address,
                    "plain objects from a device that has a key: refused (anyone can send a plain one)")
            }
            try decodeObjects(bytes, from: index, where: "", address: address, into: &payload)
            return payload
        }
        guard version >= 4 else {
            throw AdvertisementError(
                .unsupportedEncryption, .mibeacon, address,
                "MiBeacon \(version) encrypts without an authentication tag, so a wrong key cannot be told from a "
                    + "right one: not decoded")
        }
        // Ciphertext, counter bytes 1–3, tag (4).
        guard bytes.count >= index &+ 7 else {
            throw .truncated(
                .mibeacon, address, "the counter and tag", needs: 7, at: index, has: bytes.count)
        }
        let counterOffset = bytes.count &- 7
        let counter =
            UInt32(frameCounter) | UInt32(bytes[counterOffset]) << 8
            | UInt32(bytes[counterOffset &+ 1]) << 16 | UInt32(bytes[counterOffset &+ 2]) << 24
        guard device.key != nil else {
            throw AdvertisementError(
                .keyRequired, .mibeacon, address, "the advertisement is encrypted and the device has no key")
        }
        let verdict = try replayGuard.check(counter, where: "MiBeacon from \(address)")
        // One array, written whole: the address least significant first (``BluetoothAddress/reversedBytes``), the
        // product id and frame counter as sent, the 3 counter bytes.
        let nonceAddress = address.rawValue
        let nonce: [UInt8] = [
            UInt8(truncatingIfNeeded: nonceAddress), UInt8(truncatingIfNeeded: nonceAddress >> 8),
            UInt8(truncatingIfNeeded: nonceAddress >> 16), UInt8(truncatingIfNeeded: nonceAddress >> 24),
            UInt8(truncatingIfNeeded: nonceAddress >> 32), UInt8(truncatingIfNeeded: nonceAddress >> 40),
            bytes[2], bytes[3], bytes[4],
            bytes[counterOffset], bytes[counterOffset &+ 1], bytes[counterOffset &+ 2],
        ]
        let plaintext = try device.open(
            .mibeacon, ciphertext: bytes[index..<counterOffset], tag: bytes[(counterOffset &+ 3)...], nonce: nonce,
            associatedData: associatedData)
        replayGuard.record(counter)
        payload.counter = counter
        payload.isRepeat = verdict == .repeated
        try decodeObjects(plaintext, from: 0, where: " of the decrypted data", address: address, into: &payload)
        return payload
    }

    /// Reads the objects of `data` from `start`. Unknown objects are skipped (their length is known) and named in
    /// the payload's issues; a truncated one ends the reading. Throws when no object could be decoded.
    private static func decodeObjects(
        _ data: [UInt8], from start: Int, where context: String, address: BluetoothAddress,
        into payload: inout AdvertisementPayload
    ) throws(AdvertisementError) {
        var readings: [Reading] = []
        var index = start
        var decodedAny = false
        while index < data.count {
            guard data.count &- index >= 3 else {
                payload.issues.append(
                    .truncated(
                        .mibeacon, address, "an object header\(context)", needs: 3, at: index, has: data.count))
                break
            }
            let id = UInt16(data[index]) | UInt16(data[index &+ 1]) << 8
            let length = Int(data[index &+ 2])
            let dataStart = index &+ 3
            // Spelled only for a message: an allocation per object would show in the cost of a decode.
            var idText: String { HexText.number(UInt64(id), digits: 4) }
            guard length <= data.count &- dataStart else {
                payload.issues.append(
                    .truncated(
                        .mibeacon, address, "object \(idText)\(context)", needs: length, at: dataStart,
                        has: data.count))
                break
            }
            if let slot = slot(of: id) {
                if length >= slot.size {
                    fieldList.appendReadings(from: data, base: dataStart, to: &readings, range: slot.fields)
                } else {
                    for field in fieldList.fields[slot.fields] {
                        readings.append(
                            .failed(
                                field.name, unit: field.unit,
                                ReadingError(
                                    .payloadTooShort,
                                    "object \(idText) at offset \(index)\(context) has \(length) "
                                        + "\(length == 1 ? "byte" : "bytes"), needs \(slot.size)")))
                    }
                }
                decodedAny = true
            } else {
                payload.issues.append(
                    AdvertisementError(
                        .unknownObject, .mibeacon, address,
                        "object \(idText) (\(length) \(length == 1 ? "byte" : "bytes")) at offset \(index)\(context) "
                            + "is not one this decoder knows; skipped"))
            }
            index = dataStart &+ length
        }
        guard decodedAny else {
            throw payload.issues.first
                ?? .truncated(.mibeacon, address, "an object\(context)", needs: 3, at: start, has: data.count)
        }
        ReadingNames.numberRepeated(&readings)
        payload.readings = readings
    }
}
