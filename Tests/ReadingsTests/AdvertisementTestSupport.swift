import Basics
import LibCrypto
import Testing

@testable import Readings

/// Shorthands for the advertisement tests: vectors are written as the hex their sources print.
enum Advertised {
    /// The decoder every test uses, over the real libcrypto.
    static let decoder = AdvertisementDecoder(cipher: LibCryptoAESCCM())
    static let cipher = LibCryptoAESCCM()

    /// `"40 02 ca09"` → bytes; spaces ignored. A typo in a vector is a test failure, not a trap.
    static func bytes(_ hex: String) -> [UInt8] {
        let digits = hex.filter { !$0.isWhitespace }
        guard let bytes = Hex.bytes(digits) else {
            Issue.record("not hex: \(hex)")
            return []
        }
        return bytes
    }

    static func address(_ text: String) -> BluetoothAddress {
        do {
            return try BluetoothAddress(parsing: text)
        } catch {
            Issue.record("\(error)")
            return BluetoothAddress(truncating: 0)
        }
    }

    static func key(_ hex: String) -> AdvertisementKey? {
        do {
            return try AdvertisementKey(hex: hex)
        } catch {
            Issue.record("\(error)")
            return nil
        }
    }

    /// Decodes with a fresh replay guard.
    static func decode(
        _ hex: String, from source: AdvertisementSource, address: String, key: String? = nil
    ) throws(AdvertisementError) -> AdvertisementPayload {
        var replay = ReplayGuard()
        return try decoder.decode(
            bytes(hex), from: source, address: self.address(address), key: key.flatMap(self.key),
            replayGuard: &replay)
    }

    /// The error decoding throws, or `nil` (recorded as an issue) when it decodes.
    static func failure(
        _ hex: String, from source: AdvertisementSource, address: String, key: String? = nil,
        replay: inout ReplayGuard
    ) -> AdvertisementError? {
        do {
            let payload = try decoder.decode(
                bytes(hex), from: source, address: self.address(address), key: key.flatMap(self.key),
                replayGuard: &replay)
            Issue.record("decoded, expected an error: \(payload)")
            return nil
        } catch {
            return error
        }
    }

    static func failure(
        _ hex: String, from source: AdvertisementSource, address: String, key: String? = nil
    ) -> AdvertisementError? {
        var replay = ReplayGuard()
        return failure(hex, from: source, address: address, key: key, replay: &replay)
    }
}

/// A reading as a vector writes it.
func reading(_ name: String, _ value: Reading.Value, _ unit: String? = nil) -> Reading {
    Reading(name: name, value: value, unit: unit)
}

/// A reading the advertisement marks "not available".
func notAvailable(_ name: String, _ raw: String, _ unit: String? = nil) -> Reading {
    .failed(name, unit: unit, ReadingError(.specialValue, "\(raw): not available"))
}
