/// GSS Date Time (7 bytes: year uint16, month, day, hours, minutes, seconds as uint8) to text
/// `YYYY-MM-DDTHH:MM:SS`, formatted by hand because the module does not import Foundation.
///
/// GSS Date Time: year 1582…9999 with 0 meaning "not known"; month 1…12 and day 1…31 with 0
/// meaning "not known"; hours 0…23, minutes 0…59, seconds 0…59. An unknown date part is a
/// ``ReadingError/Code/specialValue`` (a partial date would read as a real one); a part out of
/// its range, or a day the month does not have, is ``ReadingError/Code/outOfRange``.
enum DateTimeText {
    /// The size of a GSS Date Time.
    static let byteCount = 7

    static func text(from reader: ByteReader, at offset: Int) throws(ReadingError) -> String {
        try reader.require(byteCount, at: offset)
        let year = Int(try reader.unsignedBits(at: offset, byteCount: 2, order: .little))
        let month = Int(try reader.byte(at: offset &+ 2))
        let day = Int(try reader.byte(at: offset &+ 3))
        let hours = Int(try reader.byte(at: offset &+ 4))
        let minutes = Int(try reader.byte(at: offset &+ 5))
        let seconds = Int(try reader.byte(at: offset &+ 6))
        for (part, value) in [("year", year), ("month", month), ("day", day)] where value == 0 {
            throw ReadingError(.specialValue, "\(part) 0: value is not known")
        }
        try check("year", year, 1582...9999)
        try check("month", month, 1...12)
        try check("hours", hours, 0...23)
        try check("minutes", minutes, 0...59)
        try check("seconds", seconds, 0...59)
        let monthLength = daysIn(month: month, year: year)
        guard day <= monthLength else {
            throw ReadingError(
                .outOfRange, "day \(day) is outside 1…\(monthLength) for \(padded(year, 4))-\(padded(month, 2))")
        }
        let date = "\(padded(year, 4))-\(padded(month, 2))-\(padded(day, 2))"
        return "\(date)T\(padded(hours, 2)):\(padded(minutes, 2)):\(padded(seconds, 2))"
    }

    private static func check(_ part: String, _ value: Int, _ range: ClosedRange<Int>) throws(ReadingError) {
        guard range.contains(value) else {
            throw ReadingError(.outOfRange, "\(part) \(value) is outside \(range.lowerBound)…\(range.upperBound)")
        }
    }

    /// Gregorian month lengths (GSS years start at 1582, the Gregorian calendar's first).
    static func daysIn(month: Int, year: Int) -> Int {
        switch month {
        case 2: (year % 4 == 0 && year % 100 != 0) || year % 400 == 0 ? 29 : 28
        case 4, 6, 9, 11: 30
        default: 31
        }
    }

    static func padded(_ value: Int, _ width: Int) -> String {
        let digits = String(value)
        return digits.count >= width ? digits : String(repeating: "0", count: width - digits.count) + digits
    }
}
