/// The two text formats the registry renders.
public enum MetricsFormat: Sendable, Hashable {
    /// Prometheus text 0.0.4: what node_exporter's textfile collector reads, and what a scraper gets unless it
    /// asks for OpenMetrics.
    case prometheus
    /// OpenMetrics 1.0: `# UNIT`, counter families named without `_total`, `# EOF` at the end.
    case openMetrics

    public var contentType: String {
        switch self {
        case .prometheus: "text/plain; version=0.0.4; charset=utf-8"
        case .openMetrics: "application/openmetrics-text; version=1.0.0; charset=utf-8"
        }
    }

    /// OpenMetrics when the `Accept` header names it, else Prometheus 0.0.4 (what Prometheus itself does
    /// without a match).
    public init(accept: String?) {
        self = accept?.contains("application/openmetrics-text") == true ? .openMetrics : .prometheus
    }
}

extension MetricsRegistry {
    /// Every family with a series, in `format`: HELP and TYPE (and UNIT in OpenMetrics) before its samples,
    /// label values escaped, a histogram's buckets cumulative and ending in `+Inf`, then `_sum` and `_count`.
    public func render(_ format: MetricsFormat) -> String {
        var text = ""
        text.reserveCapacity(4_096)
        for (family, series) in snapshot() {
            let name = format == .openMetrics ? family.name : family.prometheusName
            if format == .openMetrics {
                text += "# TYPE \(name) \(family.kind.rawValue)\n"
                if let unit = family.unit { text += "# UNIT \(name) \(unit)\n" }
                text += "# HELP \(name) \(Self.escapedHelp(family.help, format))\n"
            } else {
                text += "# HELP \(name) \(Self.escapedHelp(family.help, format))\n"
                text += "# TYPE \(name) \(family.kind.rawValue)\n"
            }
            for (labels, value) in series {
                switch value {
                case .counter(let counter):
                    text += Self.sample(family.name + "_total", labels.pairs, Self.number(counter.value))
                case .gauge(let gauge):
                    text += Self.sample(family.name, labels.pairs, Self.number(gauge.value))
                case .histogram(let histogram):
                    let counts = histogram.value
                    var cumulative: Int64 = 0
                    for (index, bound) in histogram.bounds.enumerated() {
                        cumulative += counts.buckets[index]
                        text += Self.sample(
                            family.name + "_bucket", labels.pairs + [.init(name: "le", value: Self.number(bound))],
                            Self.number(cumulative))
                    }
                    text += Self.sample(
                        family.name + "_bucket", labels.pairs + [.init(name: "le", value: "+Inf")],
                        Self.number(counts.count))
                    text += Self.sample(family.name + "_sum", labels.pairs, Self.number(counts.sum))
                    text += Self.sample(family.name + "_count", labels.pairs, Self.number(counts.count))
                }
            }
        }
        if format == .openMetrics { text += "# EOF\n" }
        return text
    }

    private static func sample(_ name: String, _ labels: [Pair], _ value: String) -> String {
        guard !labels.isEmpty else { return "\(name) \(value)\n" }
        let rendered = labels.map { "\($0.name)=\"\(escapedLabel($0.value))\"" }.joined(separator: ",")
        return "\(name){\(rendered)} \(value)\n"
    }

    /// A label value: backslash, double quote and line feed escaped (both formats); device names come from the
    /// user's file.
    static func escapedLabel(_ value: String) -> String {
        guard value.utf8.contains(where: { $0 == UInt8(ascii: "\\") || $0 == UInt8(ascii: "\"") || $0 == 0x0A })
        else { return value }
        var escaped = ""
        for character in value.unicodeScalars {
            switch character {
            case "\\": escaped += "\\\\"
            case "\"": escaped += "\\\""
            case "\n": escaped += "\\n"
            default: escaped.unicodeScalars.append(character)
            }
        }
        return escaped
    }

    /// HELP text: backslash and line feed escaped; a double quote too in OpenMetrics (0.0.4 has no such escape).
    static func escapedHelp(_ help: String, _ format: MetricsFormat) -> String {
        var escaped = ""
        for character in help.unicodeScalars {
            switch character {
            case "\\": escaped += "\\\\"
            case "\n": escaped += "\\n"
            case "\"" where format == .openMetrics: escaped += "\\\""
            default: escaped.unicodeScalars.append(character)
            }
        }
        return escaped
    }

    static func number(_ value: Int64) -> String { String(value) }

    /// A float as both formats read it: `+Inf`, `-Inf`, `NaN`; whole numbers with `.0` (OpenMetrics' canonical
    /// form for `le`), others as Swift's shortest round-trip text.
    static func number(_ value: Double) -> String {
        if value.isNaN { return "NaN" }
        if value.isInfinite { return value > 0 ? "+Inf" : "-Inf" }
        return value.description
    }
}
