/// CRC-32 (IEEE 802.3, the polynomial zlib and PNG use), table-driven: the spool's check that a record is
/// whole. Written here rather than linked from zlib to keep the module free of another system library for
/// eight lines of arithmetic.
enum CRC32 {
    private static let table: [UInt32] = (0..<256).map { index in
        var value = UInt32(index)
        for _ in 0..<8 { value = value & 1 == 1 ? 0xEDB8_8320 ^ (value >> 1) : value >> 1 }
        return value
    }

    static func checksum(_ bytes: ArraySlice<UInt8>) -> UInt32 {
        // Over the buffer, not through the generic `Sequence` iterator: recovery checks every byte of the spool.
        bytes.withUnsafeBufferPointer { buffer in
            table.withUnsafeBufferPointer { table in
                var crc: UInt32 = 0xFFFF_FFFF
                for byte in buffer { crc = table[Int((crc ^ UInt32(byte)) & 0xFF)] ^ (crc >> 8) }
                return crc ^ 0xFFFF_FFFF
            }
        }
    }

    static func checksum(_ bytes: [UInt8]) -> UInt32 {
        checksum(bytes[...])
    }
}
