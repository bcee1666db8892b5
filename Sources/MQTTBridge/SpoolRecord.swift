/// One record of the spool, and its bytes on disk.
///
/// ```
/// offset  size  field
/// 0       4     body length L (UInt32, little endian)
/// 4       4     CRC-32 (IEEE) of the L body bytes (UInt32, little endian)
/// 8       L     body:
///                 0   8   seq (UInt64 LE), the daemon's record sequence number
///                 8   1   flags: bit 0 = the poll succeeded
///                 9   2   D, the device name's length in bytes (UInt16 LE)
///                 11  D   the device name, UTF-8
///                 11+D …  the payload: the record's JSON bytes, as published
/// ```
///
/// A record is whole only when its length fits in what is left of the file, the length covers its own header
/// fields (L ≥ 11 + D) and the checksum matches. A write torn by a crash fails one of those (a zero-filled tail
/// has L = 0), so it is detected rather than replayed as garbage.
struct SpoolRecord: Sendable, Hashable {
    static let headerSize = 8
    static let bodyHeaderSize = 11

    var sequence: UInt64
    var succeeded: Bool
    var device: String
    var payload: [UInt8]

    /// The record's bytes on disk, header included.
    func encoded() -> [UInt8] {
        let name = Array(device.utf8.prefix(Int(UInt16.max)))
        var body: [UInt8] = []
        body.reserveCapacity(Self.bodyHeaderSize + name.count + payload.count)
        appendLittleEndian(sequence, to: &body)
        body.append(succeeded ? 1 : 0)
        appendLittleEndian(UInt16(name.count), to: &body)
        body += name
        body += payload
        var bytes: [UInt8] = []
        bytes.reserveCapacity(Self.headerSize + body.count)
        appendLittleEndian(UInt32(body.count), to: &bytes)
        appendLittleEndian(CRC32.checksum(body), to: &bytes)
        bytes += body
        return bytes
    }

    /// The length and checksum of a record whose 8 header bytes are `header`.
    static func header(_ header: ArraySlice<UInt8>) -> (length: Int, checksum: UInt32)? {
        guard header.count >= headerSize else { return nil }
        let start = header.startIndex
        return (
            Int(readInteger(header, at: start, as: UInt32.self)), readInteger(header, at: start + 4, as: UInt32.self)
        )
    }

    /// Decodes a body whose checksum was `checksum`; nil when it does not match or does not hold together.
    static func decode(body: ArraySlice<UInt8>, checksum: UInt32) -> SpoolRecord? {
        guard body.count >= bodyHeaderSize, CRC32.checksum(body) == checksum else { return nil }
        let start = body.startIndex
        let sequence = readInteger(body, at: start, as: UInt64.self)
        let flags = body[start + 8]
        let nameLength = Int(readInteger(body, at: start + 9, as: UInt16.self))
        guard body.count >= bodyHeaderSize + nameLength else { return nil }
        let nameStart = start + bodyHeaderSize
        let device = String(decoding: body[nameStart..<(nameStart + nameLength)], as: UTF8.self)
        let payload = Array(body[(nameStart + nameLength)...])
        return SpoolRecord(sequence: sequence, succeeded: flags & 1 == 1, device: device, payload: payload)
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
