import Basics
@testable import Readings

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

extension SplitMix64 {
    /// `count` random bytes.
    mutating func bytes(count: Int) -> [UInt8] {
        (0..<count).map { _ in UInt8(truncatingIfNeeded: next()) }
    }
}

/// Shorthands for the tests.
enum Decode {
    static func sig(_ uuid16: UInt16, _ bytes: [UInt8]) -> [Reading] {
        ReadingsDecoder.decode(bytes, as: .sig(uuid16))
    }

    /// The only reading of a single-value characteristic.
    static func single(_ uuid16: UInt16, _ bytes: [UInt8]) -> Reading? {
        let readings = sig(uuid16, bytes)
        return readings.count == 1 ? readings[0] : nil
    }

    static func field(_ format: ValueFormat, _ bytes: [UInt8], at offset: Int = 0) -> Reading {
        ReadingsDecoder.decode(bytes, as: .layout(Layout(fields: [Field(name: "value", at: offset, format: format)])))[
            0]
    }

    static func named(_ readings: [Reading], _ name: String) -> Reading? {
        readings.first { $0.name == name }
    }
}

/// The environment variable, without Foundation.
func environment(_ name: String) -> String? {
    guard let value = getenv(name) else { return nil }
    return String(cString: value)
}
