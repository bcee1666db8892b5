/// Why a payload is not JSON the fleet accepts. Positions are byte offsets into the payload.
public enum JSONSyntaxError: Error, Equatable, Sendable {
    case tooLong(Int)
    case tooDeep(at: Int)
    case unexpectedEnd
    case unexpectedByte(UInt8, at: Int)
    case integerOutOfRange(at: Int)
    case invalidEscape(at: Int)
    case invalidUTF8(at: Int)
    case trailingBytes(at: Int)
}

/// A strict, bounded JSON reader: every read is bounds-checked, nesting and size are capped, and anything
/// surprising is a typed error — payloads come from the broker, so from anyone who can publish there.
package struct JSONParser {
    package static let maximumBytes = 16_384
    package static let maximumDepth = 8

    private let bytes: [UInt8]
    private var position = 0
    /// Numbers with a fraction or an exponent (and integers beyond Int64) as `.number` rather than refused.
    private let anyNumber: Bool

    /// The fleet's own messages: integers only, at most `maximumBytes`.
    package static func parse(_ bytes: [UInt8]) throws(JSONSyntaxError) -> JSONValue {
        try parse(bytes, anyNumber: false, maximumBytes: maximumBytes)
    }

    /// Any JSON (poll records, whose readings are decimals), up to `maximumBytes` and `maximumDepth`.
    package static func parse(_ bytes: [UInt8], anyNumber: Bool, maximumBytes: Int) throws(JSONSyntaxError) -> JSONValue
    {
        guard bytes.count <= maximumBytes else { throw .tooLong(bytes.count) }
        var parser = JSONParser(bytes: bytes, anyNumber: anyNumber)
        let value = try parser.parseValue(depth: 0)
        parser.skipWhitespace()
        guard parser.position == bytes.count else { throw .trailingBytes(at: parser.position) }
        return value
    }

    private init(bytes: [UInt8], anyNumber: Bool) {
        self.bytes = bytes
        self.anyNumber = anyNumber
    }

    private mutating func skipWhitespace() {
        while position < bytes.count,
            bytes[position] == 0x20 || bytes[position] == 0x0A || bytes[position] == 0x0D || bytes[position] == 0x09
        {
            position += 1
        }
    }

    private mutating func next() throws(JSONSyntaxError) -> UInt8 {
        guard position < bytes.count else { throw .unexpectedEnd }
        defer { position += 1 }
        return bytes[position]
    }

    private mutating func expect(_ literal: String) throws(JSONSyntaxError) {
        for expected in literal.utf8 {
            let start = position
            let byte = try next()
            guard byte == expected else { throw .unexpectedByte(byte, at: start) }
        }
    }

    private mutating func parseValue(depth: Int) throws(JSONSyntaxError) -> JSONValue {
        guard depth <= Self.maximumDepth else { throw .tooDeep(at: position) }
        skipWhitespace()
        guard position < bytes.count else { throw .unexpectedEnd }
        switch bytes[position] {
        case UInt8(ascii: "n"):
            try expect("null")
            return .null
        case UInt8(ascii: "t"):
            try expect("true")
            return .bool(true)
        case UInt8(ascii: "f"):
            try expect("false")
            return .bool(false)
        case UInt8(ascii: "\""): return .string(try parseString())
        case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"):
            return anyNumber ? try parseNumber() : .integer(try parseInteger())
        case UInt8(ascii: "["): return try parseArray(depth: depth)
        case UInt8(ascii: "{"): return try parseObject(depth: depth)
        case let byte: throw .unexpectedByte(byte, at: position)
        }
    }

    private mutating func parseInteger() throws(JSONSyntaxError) -> Int64 {
        let start = position
        var negative = false
        if bytes[position] == UInt8(ascii: "-") {
            negative = true
            position += 1
        }
        var magnitude: Int64 = 0
        var digits = 0
        while position < bytes.count, bytes[position] >= UInt8(ascii: "0"), bytes[position] <= UInt8(ascii: "9") {
            let digit = Int64(bytes[position] - UInt8(ascii: "0"))
            let (times, overflowTimes) = magnitude.multipliedReportingOverflow(by: 10)
            let (sum, overflowSum) = times.addingReportingOverflow(digit)
            guard !overflowTimes, !overflowSum else { throw .integerOutOfRange(at: start) }
            magnitude = sum
            digits += 1
            position += 1
        }
        guard digits > 0 else {
            throw position < bytes.count ? .unexpectedByte(bytes[position], at: position) : .unexpectedEnd
        }
        if position < bytes.count, [UInt8(ascii: "."), UInt8(ascii: "e"), UInt8(ascii: "E")].contains(bytes[position]) {
            throw .unexpectedByte(bytes[position], at: position)
        }
        return negative ? -magnitude : magnitude
    }

    /// RFC 8259's number grammar: `-? (0 | [1-9][0-9]*) (. [0-9]+)? ([eE] [-+]? [0-9]+)?`; an integer within
    /// Int64 as `.integer`, anything else as `.number` with its text.
    private mutating func parseNumber() throws(JSONSyntaxError) -> JSONValue {
        let start = position
        func digits() throws(JSONSyntaxError) {
            let first = position
            while position < bytes.count, (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(bytes[position]) {
                position += 1
            }
            guard position > first else {
                throw position < bytes.count ? .unexpectedByte(bytes[position], at: position) : .unexpectedEnd
            }
        }
        if bytes[position] == UInt8(ascii: "-") { position += 1 }
        if position < bytes.count, bytes[position] == UInt8(ascii: "0") {
            position += 1
        } else {
            try digits()
        }
        var integral = true
        if position < bytes.count, bytes[position] == UInt8(ascii: ".") {
            integral = false
            position += 1
            try digits()
        }
        if position < bytes.count, bytes[position] == UInt8(ascii: "e") || bytes[position] == UInt8(ascii: "E") {
            integral = false
            position += 1
            if position < bytes.count, bytes[position] == UInt8(ascii: "+") || bytes[position] == UInt8(ascii: "-") {
                position += 1
            }
            try digits()
        }
        let text = String(decoding: bytes[start..<position], as: UTF8.self)
        if integral, let value = Int64(text) { return .integer(value) }
        return .number(text)
    }

    private mutating func parseString() throws(JSONSyntaxError) -> String {
        position += 1  // the opening quote
        var scalars = String.UnicodeScalarView()
        var raw: [UInt8] = []
        while true {
            let start = position
            let byte = try next()
            switch byte {
            case UInt8(ascii: "\""):
                try flush(&raw, into: &scalars, at: start)
                return String(scalars)
            case UInt8(ascii: "\\"):
                try flush(&raw, into: &scalars, at: start)
                let escape = try next()
                switch escape {
                case UInt8(ascii: "\""): scalars.append("\"")
                case UInt8(ascii: "\\"): scalars.append("\\")
                case UInt8(ascii: "/"): scalars.append("/")
                case UInt8(ascii: "b"): scalars.append("\u{08}")
                case UInt8(ascii: "f"): scalars.append("\u{0C}")
                case UInt8(ascii: "n"): scalars.append("\n")
                case UInt8(ascii: "r"): scalars.append("\r")
                case UInt8(ascii: "t"): scalars.append("\t")
                case UInt8(ascii: "u"):
                    var code: UInt32 = 0
                    for _ in 0..<4 {
                        let hex = try next()
                        guard let nibble = Hex.value(of: hex).map(UInt32.init) else { throw .invalidEscape(at: start) }
                        code = code << 4 | nibble
                    }
                    // Surrogate pairs are refused rather than decoded: no fleet field needs them.
                    guard let scalar = Unicode.Scalar(code) else { throw .invalidEscape(at: start) }
                    scalars.append(scalar)
                default: throw .invalidEscape(at: start)
                }
            case 0..<0x20: throw .unexpectedByte(byte, at: start)
            default: raw.append(byte)
            }
        }
    }

    private func flush(
        _ raw: inout [UInt8], into scalars: inout String.UnicodeScalarView, at offset: Int
    ) throws(JSONSyntaxError) {
        guard !raw.isEmpty else { return }
        var decoder = UTF8()
        var iterator = raw.makeIterator()
        decoding: while true {
            switch decoder.decode(&iterator) {
            case .scalarValue(let scalar): scalars.append(scalar)
            case .emptyInput: break decoding
            case .error: throw .invalidUTF8(at: offset)
            }
        }
        raw.removeAll(keepingCapacity: true)
    }

    private mutating func parseArray(depth: Int) throws(JSONSyntaxError) -> JSONValue {
        position += 1
        var elements: [JSONValue] = []
        skipWhitespace()
        if position < bytes.count, bytes[position] == UInt8(ascii: "]") {
            position += 1
            return .array(elements)
        }
        while true {
            elements.append(try parseValue(depth: depth + 1))
            skipWhitespace()
            let start = position
            let byte = try next()
            if byte == UInt8(ascii: "]") { return .array(elements) }
            guard byte == UInt8(ascii: ",") else { throw .unexpectedByte(byte, at: start) }
        }
    }

    private mutating func parseObject(depth: Int) throws(JSONSyntaxError) -> JSONValue {
        position += 1
        var members: [(String, JSONValue)] = []
        skipWhitespace()
        if position < bytes.count, bytes[position] == UInt8(ascii: "}") {
            position += 1
            return .object(members)
        }
        while true {
            skipWhitespace()
            guard position < bytes.count else { throw .unexpectedEnd }
            guard bytes[position] == UInt8(ascii: "\"") else { throw .unexpectedByte(bytes[position], at: position) }
            let key = try parseString()
            skipWhitespace()
            let colon = position
            let separator = try next()
            guard separator == UInt8(ascii: ":") else { throw .unexpectedByte(separator, at: colon) }
            members.append((key, try parseValue(depth: depth + 1)))
            skipWhitespace()
            let start = position
            let byte = try next()
            if byte == UInt8(ascii: "}") { return .object(members) }
            guard byte == UInt8(ascii: ",") else { throw .unexpectedByte(byte, at: start) }
        }
    }
}
