import DBus

#if canImport(Glibc)
    import Glibc
#endif

/// The terminal views of `keepalive status`, `explain` and `poll`, from the daemon's replies (pure: tested
/// with replies made by hand).
enum StatusView {
    static func nowMilliseconds() -> Int64 {
        var spec = timespec()
        clock_gettime(CLOCK_REALTIME, &spec)
        return Int64(spec.tv_sec) * 1000 + Int64(spec.tv_nsec) / 1_000_000
    }

    static func text(_ status: [String: DBusValue], now: Int64) -> String {
        var text = "keepalive \(status["version"]?.stringValue ?? "?"): \(status["health"]?.stringValue ?? "")\n"
        if let power = status["power"]?.stringValue, power != "normal" { text += "host power: \(power)\n" }
        let devices = status["devices"]?.elements.map(\.fields) ?? []
        var rows = [["DEVICE", "STATE", "LAST", "AGE", "NEXT", "FAILS", "HOLDER"]]
        for device in devices {
            let last = device["last_result"]?.stringValue.map { result in
                result == "failed" ? "failed: \(device["last_error"]?.stringValue ?? "?")" : result
            }
            let age = device["last_age_s"]?.doubleValue.map { Self.compact(seconds: $0) + " ago" }
            let next = device["next_due"]?.stringValue.flatMap(Self.milliseconds(iso:)).map { due in
                due <= now ? "due" : "in " + Self.compact(seconds: Double(due - now) / 1000)
            }
            rows.append([
                device["name"]?.stringValue ?? "?", device["state"]?.stringValue ?? "?", last ?? "-", age ?? "-",
                next ?? "-", device["failures_in_row"]?.doubleValue.map { String(Int($0)) } ?? "0",
                device["holder"]?.stringValue ?? "",
            ])
        }
        text += "\n" + table(rows)
        let adapters = status["adapters"]?.elements.map(\.fields) ?? []
        if !adapters.isEmpty {
            text += "\n"
            for adapter in adapters {
                let name = adapter["name"]?.stringValue ?? "?"
                let healthy = adapter["healthy"]?.boolValue ?? true
                let count = adapter["devices"]?.doubleValue.map { Int($0) } ?? 0
                text += "adapter \(name): " + (healthy ? "healthy" : "UNHEALTHY: \(adapter["why"]?.stringValue ?? "")")
                text += ", \(count) device\(count == 1 ? "" : "s")\n"
            }
        }
        if let mqtt = status["mqtt"]?.fields, !mqtt.isEmpty {
            let connected = mqtt["connected"]?.boolValue ?? false
            let depth = mqtt["spool_depth"]?.doubleValue.map { Int($0) } ?? 0
            let delivered = mqtt["delivered"]?.doubleValue.map { Int($0) } ?? 0
            let dropped = mqtt["dropped"]?.doubleValue.map { Int($0) } ?? 0
            text +=
                "mqtt: \(connected ? "connected" : "NOT CONNECTED"), spool \(depth) record"
                + "\(depth == 1 ? "" : "s") waiting, \(delivered) delivered, \(dropped) dropped"
            if let problem = mqtt["problem"]?.stringValue { text += " — \(problem)" }
            text += "\n"
        }
        return text
    }

    static func explanation(_ fields: [String: DBusValue]) -> String {
        var text = "\(fields["device"]?.stringValue ?? "?")\n"
        for line in fields["now"]?.elements.compactMap(\.stringValue) ?? [] { text += "  now: \(line)\n" }
        let decisions = fields["decisions"]?.elements.map(\.fields) ?? []
        if decisions.isEmpty { text += "  no decisions yet (the daemon has not reached its first tick)\n" }
        for decision in decisions { text += "  \(decision["text"]?.stringValue ?? "?")\n" }
        return text
    }

    static func pollResult(_ fields: [String: DBusValue]) -> String {
        var text = "\(fields["device"]?.stringValue ?? "?"): \(fields["result"]?.stringValue ?? "?")"
        if let error = fields["error"]?.stringValue {
            text += " (\(error): \(fields["error_message"]?.stringValue ?? ""))"
        }
        let readings = fields["readings"]?.fields ?? [:]
        if !readings.isEmpty {
            text +=
                " — "
                + readings.keys.sorted().map { name in
                    let value = readings[name].map { value -> String in
                        if let number = value.doubleValue { return "\(number)" }
                        if let flag = value.boolValue { return flag ? "on" : "off" }
                        return value.stringValue ?? value.json
                    }
                    return "\(name) \(value ?? "?")"
                }.joined(separator: ", ")
        }
        return text + "\n"
    }

    /// Columns padded to their widest cell.
    static func table(_ rows: [[String]]) -> String {
        guard let header = rows.first else { return "" }
        var widths = header.map(\.count)
        for row in rows {
            for (index, cell) in row.enumerated() where index < widths.count {
                widths[index] = max(widths[index], cell.count)
            }
        }
        return rows.map { row in
            var line = ""
            for (index, cell) in row.enumerated() {
                line +=
                    index == row.count - 1 ? cell : cell + String(repeating: " ", count: widths[index] - cell.count + 2)
            }
            while line.last == " " { line.removeLast() }
            return line + "\n"
        }.joined()
    }

    /// `45s`, `3m`, `2h`, `4d`.
    static func compact(seconds: Double) -> String {
        let whole = Int(seconds.rounded())
        if whole < 120 { return "\(whole)s" }
        if whole < 7200 { return "\(whole / 60)m" }
        if whole < 172_800 { return "\(whole / 3600)h" }
        return "\(whole / 86400)d"
    }

    /// `2026-11-27T21:40:05.123Z` as milliseconds since 1970.
    static func milliseconds(iso text: String) -> Int64? {
        let utf8 = Array(text.utf8)
        guard utf8.count == 24, utf8[23] == UInt8(ascii: "Z") else { return nil }
        func number(_ range: Range<Int>) -> Int32? {
            var value: Int32 = 0
            for byte in utf8[range] {
                guard (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) else { return nil }
                value = value * 10 + Int32(byte - UInt8(ascii: "0"))
            }
            return value
        }
        guard let year = number(0..<4), let month = number(5..<7), let day = number(8..<10),
            let hour = number(11..<13), let minute = number(14..<16), let second = number(17..<19),
            let milliseconds = number(20..<23)
        else { return nil }
        var parts = tm()
        parts.tm_year = year - 1900
        parts.tm_mon = month - 1
        parts.tm_mday = day
        parts.tm_hour = hour
        parts.tm_min = minute
        parts.tm_sec = second
        return Int64(timegm(&parts)) * 1000 + Int64(milliseconds)
    }
}
