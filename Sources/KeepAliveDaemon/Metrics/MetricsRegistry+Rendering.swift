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
        text.reserveCapacity(8_192)
        for family in snapshot() {
            text += format == .openMetrics ? family.openMetricsHeader : family.prometheusHeader
            for (value, prefixes) in family.series {
                switch value {
                case .counter(let counter):
                    Self.line(&text, prefixes[0], Self.number(counter.value))
                case .gauge(let gauge):
                    Self.line(&text, prefixes[0], Self.number(gauge.value))
                case .histogram(let histogram):
                    let counts = histogram.value
                    var cumulative: Int64 = 0
                    for index in histogram.bounds.indices {
                        cumulative += counts.buckets[index]
                        Self.line(&text, prefixes[index], Self.number(cumulative))
                    }
                    let last = histogram.bounds.count
                    Self.line(&text, prefixes[last], Self.number(counts.count))
                    Self.line(&text, prefixes[last + 1], Self.number(counts.sum))
                    Self.line(&text, prefixes[last + 2], Self.number(counts.count))
                }
            }
        }
        if format == .openMetrics { text += "# EOF\n" }
        return text
    }

    private static func line(_ text: inout String, _ prefix: String, _ value: String) {
        text += prefix
        text += value
        text += "\n"
    }

    /// A family's HELP and TYPE lines (TYPE, UNIT and HELP in OpenMetrics, whose counter family has no `_total`).
    static func header(_ family: MetricFamily, _ format: MetricsFormat) -> String {
        let help = escapedHelp(family.help, format)
        guard format == .openMetrics else {
            let name = family.prometheusName
            return "# HELP \(name) \(help)\n# TYPE \(name) \(family.kind.rawValue)\n"
        }
        let unit = family.unit.map { "# UNIT \(family.name) \($0)\n" } ?? ""
        return "# TYPE \(family.name) \(family.kind.rawValue)\n\(unit)# HELP \(family.name) \(help)\n"
    }

    /// What each sample line of `series` starts with, up to its value: the same in both formats. One for a counter
    /// or a gauge; a histogram's buckets (its bounds, then `+Inf`), `_sum` and `_count`.
    static func prefixes(_ family: MetricFamily, _ labels: Labels, _ series: Series) -> [String] {
        func prefix(_ name: String, _ pairs: [Pair]) -> String {
            guard !pairs.isEmpty else { return name + " " }
            let rendered = pairs.map { "\($0.name)=\"\(escapedLabel($0.value))\"" }.joined(separator: ",")
            return "\(name){\(rendered)} "
        }
        switch series {
        case .counter: return [prefix(family.name + "_total", labels.pairs)]
        case .gauge: return [prefix(family.name, labels.pairs)]
        case .histogram(let histogram):
            let bounds = histogram.bounds.map(number) + ["+Inf"]
            return bounds.map { prefix(family.name + "_bucket", labels.pairs + [Pair(name: "le", value: $0)]) } + [
                prefix(family.name + "_sum", labels.pairs), prefix(family.name + "_count", labels.pairs),
            ]
        }
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
