/// One record of the spool, and its bytes on disk (its *frame*).
///
/// ```
/// offset  size  field
/// 0       4     marker FF 4B 41 52 ("\xFFKAR"; 0xFF never occurs in UTF-8, so never in a record's JSON)
/// 4       4     body length L (UInt32, little endian)
/// 8       4     CRC-32 (IEEE) of the L body bytes (UInt32, little endian)
/// 12      4     CRC-32 of the 12 bytes before it: a damaged length is detected, never followed
/// 16      L     body:
///                 0   8   seq (UInt64 LE), the daemon's record sequence number
///                 8   1   flags: bit 0 = the poll succeeded; bit 1 = a history record (published on the
///                         device's `history` topic); bit 7 = padding (no record: see below)
///                 9   2   D, the device name's length in bytes (UInt16 LE)
///                 11  D   the device name, UTF-8
///                 11+D …  the payload: the record's JSON bytes, as published
/// ```
///
/// A frame is whole when its marker and header check hold, its length covers the body's own header (L ≥ 11 + D)
/// and fits in the file, and the body's checksum matches. Damage anywhere (a flipped bit, a torn write, a zeroed
/// flash page) fails one of those; the reader then looks for the next marker and goes on from the first whole
/// frame after it (``SegmentScan``), so damage costs only the records it touched. Recovery overwrites a damaged
/// run between whole frames with one *padding* frame of the same size, so that it is counted once, and later
/// opens skip it without a word.
///
/// Segments written before the marker existed (frames of length, CRC-32 and body only) are still read, by
/// ``SegmentScan/legacy(_:)``: such a segment is never appended to again, and it goes once acknowledged.
struct SpoolRecord: Sendable, Hashable {
    static let marker: [UInt8] = [0xFF, 0x4B, 0x41, 0x52]
    static let headerSize = 16
    static let bodyHeaderSize = 11
    /// The smallest frame: a header and a body with an empty name and payload.
    static let minimumSize = headerSize + bodyHeaderSize
    static let paddingFlag: UInt8 = 0x80

    var sequence: UInt64
    var succeeded: Bool
    var device: String
    var payload: [UInt8]
    /// A record of the device's own history, published on its `history` topic (`MQTTBridge.submit`'s
    /// `history`).
    var history = false

    init(sequence: UInt64, succeeded: Bool, device: String, payload: [UInt8], history: Bool = false) {
        self.sequence = sequence
        self.succeeded = succeeded
        self.device = device
        self.payload = payload
        self.history = history
    }

    static let historyFlag: UInt8 = 0x02

    /// The record's frame, header included.
    func encoded() -> [UInt8] {
        let name = Array(device.utf8.prefix(Int(UInt16.max)))
        var body: [UInt8] = []
        body.reserveCapacity(Self.bodyHeaderSize + name.count + payload.count)
        appendLittleEndian(sequence, to: &body)
        body.append((succeeded ? 1 : 0) | (history ? Self.historyFlag : 0))
        appendLittleEndian(UInt16(name.count), to: &body)
        body += name
        body += payload
        return Self.frame(body: body)
    }

    /// A padding frame of exactly `size` bytes (at least ``minimumSize``): a body flagged as padding, zeros after.
    static func padding(size: Int) -> [UInt8] {
        precondition(size >= minimumSize, "a padding frame needs \(minimumSize) bytes")
        var body = [UInt8](repeating: 0, count: size - headerSize)
        body[8] = paddingFlag
        return frame(body: body)
    }

    private static func frame(body: [UInt8]) -> [UInt8] {
        var bytes = marker
        bytes.reserveCapacity(headerSize + body.count)
        appendLittleEndian(UInt32(body.count), to: &bytes)
        appendLittleEndian(CRC32.checksum(body), to: &bytes)
        appendLittleEndian(CRC32.checksum(bytes), to: &bytes)
        bytes += body
        return bytes
    }

    /// The body length of the frame whose header starts `bytes`, when the marker and the header's own check
    /// hold (the length may still run past the end of the file).
    static func bodyLength(header bytes: ArraySlice<UInt8>) -> Int? {
        let start = bytes.startIndex
        guard bytes.count >= headerSize, bytes[start..<(start + 4)].elementsEqual(marker),
            CRC32.checksum(bytes[start..<(start + 12)]) == readInteger(bytes, at: start + 12, as: UInt32.self)
        else { return nil }
        return Int(readInteger(bytes, at: start + 4, as: UInt32.self))
    }

    /// What a whole frame at the start of `bytes` holds: its size, and its record (nil for padding); nil when
    /// no whole frame starts there.
    static func frame(at bytes: ArraySlice<UInt8>) -> (size: Int, record: SpoolRecord?)? {
        guard let length = bodyLength(header: bytes), length >= bodyHeaderSize,
            length <= bytes.count - headerSize
        else { return nil }
        let bodyStart = bytes.startIndex + headerSize
        let body = bytes[bodyStart..<(bodyStart + length)]
        guard CRC32.checksum(body) == readInteger(bytes, at: bytes.startIndex + 8, as: UInt32.self) else { return nil }
        if body[bodyStart + 8] & paddingFlag != 0 { return (headerSize + length, nil) }
        guard let record = decode(body: body) else { return nil }
        return (headerSize + length, record)
    }

    /// The record of exactly one whole frame, `bytes`; nil when it does not read back whole (or is padding).
    static func decode(frame bytes: ArraySlice<UInt8>) -> SpoolRecord? {
        guard let (size, record) = frame(at: bytes), size == bytes.count else { return nil }
        return record
    }

    /// Decodes a body whose checksum was checked; nil when it does not hold together.
    static func decode(body: ArraySlice<UInt8>) -> SpoolRecord? {
        guard body.count >= bodyHeaderSize else { return nil }
        let start = body.startIndex
        let sequence = readInteger(body, at: start, as: UInt64.self)
        let flags = body[start + 8]
        let nameLength = Int(readInteger(body, at: start + 9, as: UInt16.self))
        guard body.count >= bodyHeaderSize + nameLength else { return nil }
        let nameStart = start + bodyHeaderSize
        let device = String(decoding: body[nameStart..<(nameStart + nameLength)], as: UTF8.self)
        let payload = Array(body[(nameStart + nameLength)...])
        return SpoolRecord(
            sequence: sequence, succeeded: flags & 1 == 1, device: device, payload: payload,
            history: flags & historyFlag != 0)
    }

    // MARK: Segments written before the marker

    /// The frame of the first spool format: length (4), CRC-32 of the body (4), body. Only read, never written.
    enum Legacy {
        static let headerSize = 8

        /// The size and record of a whole legacy frame at the start of `bytes`.
        static func frame(at bytes: ArraySlice<UInt8>) -> (size: Int, record: SpoolRecord)? {
            guard bytes.count >= headerSize else { return nil }
            let start = bytes.startIndex
            let length = Int(readInteger(bytes, at: start, as: UInt32.self))
            guard length >= bodyHeaderSize, length <= bytes.count - headerSize else { return nil }
            let body = bytes[(start + headerSize)..<(start + headerSize + length)]
            guard CRC32.checksum(body) == readInteger(bytes, at: start + 4, as: UInt32.self),
                let record = decode(body: body)
            else { return nil }
            return (headerSize + length, record)
        }
    }
}

func appendLittleEndian<T: FixedWidthInteger>(_ value: T, to bytes: inout [UInt8]) {
    var little = value.littleEndian
    withUnsafeBytes(of: &little) { bytes.append(contentsOf: $0) }
}

/// A little-endian integer at `offset`; the caller has checked that the bytes are there.
func readInteger<T: FixedWidthInteger>(_ bytes: ArraySlice<UInt8>, at offset: Int, as: T.Type) -> T {
    var value: T = 0
    for index in 0..<MemoryLayout<T>.size {
        value |= T(bytes[offset + index]) << (8 * index)
    }
    return value
}
