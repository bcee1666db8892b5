/// Turns advertisement data into ``Reading``s: BTHome v2, pvvx and ATC1441, Xiaomi MiBeacon 2–5 and RuuviTag
/// RAWv2, plain and (BTHome, MiBeacon 4/5) encrypted. Pure: bytes in, readings out; no I/O, no clock, no
/// Foundation. The one thing it does not do itself is AES, which comes in as an ``AESCCM``.
///
/// A decoder is a value shared by every device. What is per device, the key and the ``ReplayGuard``, the caller
/// keeps and passes in:
///
/// ```swift
/// import LibCrypto
///
/// let decoder = AdvertisementDecoder(cipher: LibCryptoAESCCM())
/// let address = try BluetoothAddress(parsing: "54:48:E6:8F:80:A5")
/// let key = try AdvertisementKey(hex: "231d39c1d7cc1ab1aee224cd096db932")
/// var replay = ReplayGuard()
/// // BlueZ: ServiceData {"0000fcd2-…": 41 a4 72 66 c9 5f 73 00 11 22 33 78 23 72 14}
/// let payload = try decoder.decode(serviceData, from: .bthome, address: address, key: key, replayGuard: &replay)
/// // payload.readings: temperature 25.06 °C, humidity 50.55 %; payload.counter 0x33221100
/// ```
///
/// The rules every format follows:
/// - A device with a key accepts only encrypted advertisements that authenticate with it
///   (``AdvertisementError/Code/plainFromKeyedDevice``, ``AdvertisementError/Code/authenticationFailed``); a device
///   without one accepts only plain ones (``AdvertisementError/Code/keyRequired``).
/// - An encrypted advertisement's counter goes through the device's ``ReplayGuard``, checked before decryption
///   and recorded only after the tag verified.
/// - Never a trap on any bytes: an advertisement that cannot be used is a thrown ``AdvertisementError``; a value
///   that cannot be read inside a usable one is a reading with an error, next to the good ones.
public struct AdvertisementDecoder: Sendable {
    /// The cipher encrypted advertisements are opened with; `nil` when the caller has no keys.
    public var cipher: (any AESCCM)?

    /// A decoder; `cipher` is needed only for encrypted advertisements (`LibCryptoAESCCM()` from the `LibCrypto`
    /// module, which loads libcrypto when it first opens one).
    public init(cipher: (any AESCCM)? = nil) {
        self.cipher = cipher
    }

    /// The format of data from `source`, judged by the source and, where two formats share one, the length:
    /// `nil` when no decoder claims it. Cheap: use it to skip advertisements of other devices before decoding.
    public static func format(of source: AdvertisementSource, bytes: [UInt8]) -> AdvertisementFormat? {
        switch source {
        case .serviceData(uuid16: 0xFCD2): .bthome
        case .serviceData(uuid16: 0xFE95): .mibeacon
        case .serviceData(uuid16: 0x181A) where bytes.count == PVVXFormats.customLength: .pvvx
        case .serviceData(uuid16: 0x181A) where bytes.count == PVVXFormats.atc1441Length: .atc1441
        case .manufacturerData(companyID: 0x0499) where bytes.first == RuuviRAWv2.dataFormat: .ruuviRAWv2
        default: nil
        }
    }

    /// Decodes the data of one advertisement element.
    ///
    /// - Parameters:
    ///   - bytes: the element's data after its UUID or company identifier (BlueZ's `ServiceData` and
    ///     `ManufacturerData` values).
    ///   - source: where the bytes came from, which selects the format.
    ///   - address: the address the advertisement came from: part of the nonce of encrypted formats, and the
    ///     address in every error message.
    ///   - key: the device's key, when it has one: then only encrypted advertisements are accepted.
    ///   - replayGuard: the device's counter state, which an accepted encrypted advertisement advances.
    /// - Throws: ``AdvertisementError``. The guard moves only for an encrypted advertisement that authenticated
    ///   (even if its objects then could not be read: it did come from the device, with that counter).
    public func decode(
        _ bytes: [UInt8],
        from source: AdvertisementSource,
        address: BluetoothAddress,
        key: AdvertisementKey? = nil,
        replayGuard: inout ReplayGuard
    ) throws(AdvertisementError) -> AdvertisementPayload {
        guard let format = Self.format(of: source, bytes: bytes) else {
            throw AdvertisementError(.unsupportedFormat, Self.unclaimed(source, bytes: bytes, address: address))
        }
        let device = Device(address: address, key: key, cipher: cipher)
        switch format {
        case .bthome:
            return try BTHome.decode(bytes, device: device, replayGuard: &replayGuard)
        case .mibeacon:
            return try MiBeacon.decode(bytes, device: device, replayGuard: &replayGuard)
        case .pvvx, .atc1441, .ruuviRAWv2:
            // Formats without encryption: a device with a key must not be fed from them.
            guard key == nil else {
                throw AdvertisementError(
                    .plainFromKeyedDevice, format, address,
                    "the format has no encryption, and the device has a key: refused")
            }
            if format == .ruuviRAWv2 { return try RuuviRAWv2.decode(bytes, address: address) }
            return try PVVXFormats.decode(bytes, format: format, address: address)
        }
    }

    /// Why no decoder claims `bytes` from `source`.
    private static func unclaimed(_ source: AdvertisementSource, bytes: [UInt8], address: BluetoothAddress) -> String {
        switch source {
        case .serviceData(uuid16: 0x181A):
            "\(source) from \(address) has \(bytes.count) bytes: pvvx's format has \(PVVXFormats.customLength), "
                + "ATC1441's \(PVVXFormats.atc1441Length) (their encrypted variants are not decoded)"
        case .manufacturerData(companyID: 0x0499):
            "\(source) from \(address): "
                + (bytes.first.map { "Ruuvi data format \(HexText.number(UInt64($0), digits: 2)) is not RAWv2 (5)" }
                    ?? "no data format byte")
        default:
            "\(source) from \(address) is not a format this decoder knows"
        }
    }
}

/// What a format decoder needs to know of the device: its address, and its key and the cipher to use it with.
struct Device {
    var address: BluetoothAddress
    var key: AdvertisementKey?
    var cipher: (any AESCCM)?

    /// Decrypts and authenticates with the device's key: the plaintext, or the error that says why not.
    func open(
        _ format: AdvertisementFormat,
        ciphertext: ArraySlice<UInt8>,
        tag: ArraySlice<UInt8>,
        nonce: [UInt8],
        associatedData: [UInt8]
    ) throws(AdvertisementError) -> [UInt8] {
        guard let key else {
            throw AdvertisementError(
                .keyRequired, format, address, "the advertisement is encrypted and the device has no key")
        }
        guard let cipher else {
            throw AdvertisementError(
                .decryptionUnavailable, format, address,
                "the advertisement is encrypted and the decoder was made without a cipher")
        }
        do throws(AESCCMError) {
            return try cipher.open(
                ciphertext: ciphertext, tag: tag, key: key.bytes, nonce: nonce, associatedData: associatedData)
        } catch  where error.code == .authenticationFailed {
            throw AdvertisementError(
                .authenticationFailed, format, address,
                "the \(tag.count)-byte tag does not verify with the device's key: a wrong key, altered bytes, or "
                    + "another device's advertisement")
        } catch {
            throw AdvertisementError(.decryptionUnavailable, format, address, "cannot decrypt: \(error)")
        }
    }
}
