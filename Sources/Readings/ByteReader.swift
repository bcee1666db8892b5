/// Bounds-checked reads of fixed-width integers from a payload.
///
/// In the spirit of swift-nio's `ByteBuffer.readInteger(endianness:as:)`: the caller names the
/// width and byte order, the reader checks the bounds once and assembles the bytes. Every failure
/// is a thrown ``ReadingError`` (typed throws, so no existential allocation), never a trap.
struct ByteReader {
    /// The order of bytes in a multi-byte field.
    enum ByteOrder: Sendable, Hashable {
        /// Least significant byte first: the Bluetooth default.
        case little
        /// Most significant byte first: some vendor formats.
        case big
    }

    let bytes: [UInt8]

    init(_ bytes: [UInt8]) {
        self.bytes = bytes
    }

    /// Checks that `count` bytes exist at `offset`, without computing `offset + count`
    /// (which could overflow for a configured offset near `Int.max`).
    func require(_ count: Int, at offset: Int) throws(ReadingError) {
        guard offset >= 0 else {
            throw ReadingError(.invalidLayout, "offset \(offset) is negative")
        }
        guard offset <= bytes.count, count <= bytes.count - offset else {
            throw .payloadTooShort(needs: count, at: offset, has: bytes.count)
        }
    }

    /// Reads `byteCount` (1…8) bytes at `offset` as an unsigned integer.
    func unsignedBits(at offset: Int, byteCount: Int, order: ByteOrder) throws(ReadingError) -> UInt64 {
        try require(byteCount, at: offset)
        var result: UInt64 = 0
        switch order {
        case .little:
            var index = offset &+ byteCount
            while index > offset {
                index &-= 1
                result = result << 8 | UInt64(bytes[index])
            }
        case .big:
            for index in offset..<(offset &+ byteCount) {
                result = result << 8 | UInt64(bytes[index])
            }
        }
        return result
    }

    /// Reads `byteCount` (1…8) bytes at `offset` as a two's-complement signed integer.
    func signedInteger(at offset: Int, byteCount: Int, order: ByteOrder) throws(ReadingError) -> Int64 {
        let bits = try unsignedBits(at: offset, byteCount: byteCount, order: order)
        return Self.signExtend(bits, bitWidth: byteCount &* 8)
    }

    /// Reads one byte.
    func byte(at offset: Int) throws(ReadingError) -> UInt8 {
        try require(1, at: offset)
        return bytes[offset]
    }

    /// The bytes from `offset` to the end (empty when `offset` is exactly the end).
    func rest(from offset: Int) throws(ReadingError) -> ArraySlice<UInt8> {
        try require(0, at: offset)
        return bytes[offset...]
    }

    /// Interprets the low `bitWidth` bits of `bits` as two's complement.
    static func signExtend(_ bits: UInt64, bitWidth: Int) -> Int64 {
        guard bitWidth > 0, bitWidth < 64 else { return Int64(bitPattern: bits) }
        let shift = UInt64(64 &- bitWidth)
        return Int64(bitPattern: bits << shift) >> shift
    }
}
