/// BTHome v2 (bthome.io/format and bthome.io/encryption), service data 0xFCD2.
///
/// The data: the device information byte, then objects, each an id byte and data whose size the id fixes (or a
/// length byte says, for text and raw data). The device information byte: bit 0 encrypted, bit 1 the device's
/// address follows (6 bytes, least significant first; bthome-ble reads it so), bit 2 trigger based, bits 5–7 the
/// version (2).
///
/// Encrypted, the objects are AES-128-CCM ciphertext followed by a 4-byte counter (little endian) and a 4-byte
/// tag; the nonce is the address (written order) ‖ the UUID as sent (`D2 FC`) ‖ the device information byte ‖ the
/// counter, with no associated data.
enum BTHome {
    static func decode(
        _ bytes: [UInt8], device: Device, replayGuard: inout ReplayGuard
    ) throws(AdvertisementError) -> AdvertisementPayload {
        let address = device.address
        guard let information = bytes.first else {
            throw .truncated(.bthome, address, "the device information byte", needs: 1, at: 0, has: 0)
        }
        let version = information >> 5
        guard version == 2 else {
            throw AdvertisementError(
                .unsupportedVersion, .bthome, address,
                "the device information byte \(HexText.number(UInt64(information), digits: 2)) says version "
                    + "\(version), this decoder reads version 2")
        }
        let isEncrypted = information & 0x01 != 0
        let includesAddress = information & 0x02 != 0
        var start = 1
        var advertisedAddress: BluetoothAddress?
        if includesAddress {
            guard bytes.count >= 7 else {
                throw .truncated(.bthome, address, "the device's address", needs: 6, at: 1, has: bytes.count)
            }
            advertisedAddress = BluetoothAddress(bytes, at: 1, order: .little)
            start = 7
        }
        var payload = AdvertisementPayload(
            format: .bthome, readings: [], isEncrypted: isEncrypted, advertisedAddress: advertisedAddress,
            isTriggerBased: information & 0x04 != 0)
        guard isEncrypted else {
            guard device.key == nil else {
                throw AdvertisementError(
                    .plainFromKeyedDevice, .bthome, address,
                    "a plain advertisement from a device that has a key: refused (anyone can send a plain one)")
            }
            try decodeObjects(bytes, from: start, where: "", address: address, into: &payload)
            return payload
        }
        // Ciphertext, counter (4), tag (4).
        guard bytes.count >= start &+ 8 else {
            throw .truncated(
                .bthome, address, "the encryption counter and tag", needs: 8, at: start, has: bytes.count)
        }
        let counterOffset = bytes.count &- 8
        let counter =
            UInt32(bytes[counterOffset]) | UInt32(bytes[counterOffset &+ 1]) << 8
            | UInt32(bytes[counterOffset &+ 2]) << 16 | UInt32(bytes[counterOffset &+ 3]) << 24
        guard device.key != nil else {
            throw AdvertisementError(
                .keyRequired, .bthome, address, "the advertisement is encrypted and the device has no key")
        }
        let verdict = try replayGuard.check(counter, where: "BTHome from \(address)")
        // One array, written whole: the address in written order (``BluetoothAddress/bytes``), the UUID, the
        // device information byte, the counter as sent.
        let nonceAddress = (advertisedAddress ?? address).rawValue
        let nonce: [UInt8] = [
            UInt8(truncatingIfNeeded: nonceAddress >> 40), UInt8(truncatingIfNeeded: nonceAddress >> 32),
            UInt8(truncatingIfNeeded: nonceAddress >> 24), UInt8(truncatingIfNeeded: nonceAddress >> 16),
            UInt8(truncatingIfNeeded: nonceAddress >> 8), UInt8(truncatingIfNeeded: nonceAddress),
            0xD2, 0xFC, information,
            bytes[counterOffset], bytes[counterOffset &+ 1], bytes[counterOffset &+ 2], bytes[counterOffset &+ 3],
        ]
        let plaintext = try device.open(
            .bthome, ciphertext: bytes[start..<counterOffset], tag: bytes[(counterOffset &+ 4)...], nonce: nonce,
            associatedData: [])
        replayGuard.record(counter)
        payload.counter = counter
        payload.isRepeat = verdict == .repeated
        try decodeObjects(plaintext, from: 0, where: " of the decrypted data", address: address, into: &payload)
        return payload
    }

    /// Reads the objects of `data` from `start` into `payload`. An unknown or truncated object ends the reading:
    /// it is thrown when nothing came before it, else it is the payload's issue and the readings before it stay.
    private static func decodeObjects(
        _ data: [UInt8], from start: Int, where context: String, address: BluetoothAddress,
        into payload: inout AdvertisementPayload
    ) throws(AdvertisementError) {
        var readings: [Reading] = []
        readings.reserveCapacity(4)
        var index = start
        var decodedAny = false
        func stop(_ error: AdvertisementError) throws(AdvertisementError) {
            guard decodedAny else { throw error }
            payload.issues.append(error)
        }
        objects: while index < data.count {
            let id = data[index]
            // Spelled only for a message: an allocation per object would show in the cost of a decode.
            var idText: String { HexText.number(UInt64(id), digits: 2) }
            let slot = slots[Int(id)]
            guard slot.kind != .unknown else {
                try stop(
                    AdvertisementError(
                        .unknownObject, .bthome, address,
                        "object \(idText) at offset \(index)\(context) is not a BTHome object; the "
                            + "\(data.count &- index) bytes from it on are not read"))
                break objects
            }
            let dataStart = index &+ 1
            var size: Int
            switch slot.kind {
            case .fields: size = slot.size
            case .packetID: size = 1
            case .lengthPrefixed, .command, .unknown:
                guard dataStart < data.count else {
                    try stop(
                        .truncated(
                            .bthome, address, "object \(idText)'s length byte", needs: 1, at: dataStart,
                            has: data.count))
                    break objects
                }
                let length = data[dataStart]
                if slot.kind == .command {
                    size = 2 &+ Int(length & 0x1F)  // the length byte, the opcode, the arguments
                } else {
                    size = 1 &+ Int(length)
                }
            }
            guard size <= data.count &- dataStart else {
                try stop(
                    .truncated(
                        .bthome, address, "object \(idText)\(context)", needs: size, at: dataStart, has: data.count))
                break objects
            }
            switch slot.kind {
            case .fields:
                fieldList.appendReadings(from: data, base: dataStart, to: &readings, range: slot.fields)
            case .packetID:
                payload.packetID = UInt32(data[dataStart])
            case .lengthPrefixed:
                guard case .lengthPrefixed(let name, let isText) = byID[Int(id)]?.layout else { break }
                let content = data[(dataStart &+ 1)..<(dataStart &+ size)]
                if !isText {
                    readings.append(Reading(name: name, value: .text(HexText.bytes(content))))
                } else if let text = String(validating: content, as: UTF8.self) {
                    readings.append(Reading(name: name, value: .text(text)))
                } else {
                    readings.append(
                        .failed(
                            name,
                            ReadingError(
                                .invalidText,
                                "\(content.count) bytes at offset \(dataStart &+ 1)\(context) are not valid UTF-8")))
                }
            case .command:
                let opcode = data[dataStart &+ 1]
                if let command = commands[opcode] {
                    readings.append(Reading(name: "command", value: .text(command)))
                } else {
                    readings.append(
                        .failed(
                            "command",
                            ReadingError(
                                .reservedValue, "\(HexText.number(UInt64(opcode), digits: 2)) has no meaning")))
                }
                if size > 2 {
                    let arguments = data[(dataStart &+ 2)..<(dataStart &+ size)]
                    readings.append(Reading(name: "command_arguments", value: .text(HexText.bytes(arguments))))
                }
            case .unknown:
                break
            }
            decodedAny = true
            index = dataStart &+ size
        }
        ReadingNames.numberRepeated(&readings)
        payload.readings = readings
    }
}
