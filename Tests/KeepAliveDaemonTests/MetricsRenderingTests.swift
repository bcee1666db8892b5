import CoreMetrics
import KeepAliveDaemon
import Testing

/// The registry as swift-metrics' factory, rendered in both text formats.
@Suite("Metrics rendering")
struct MetricsRenderingTests {
    @Test func everyFamilyHasHelpAndTypeAndCountersEndInTotal() {
        let registry = MetricsRegistry()
        Counter(
            label: "keepalive_polls_total", dimensions: [("device", "a"), ("result", "newData")], factory: registry
        )
        .increment(by: 3)
        Gauge(label: "keepalive_failures_in_a_row", dimensions: [("device", "a")], factory: registry).record(2)
        let text = registry.render(.prometheus)
        #expect(
            text == """
                # HELP keepalive_polls_total Poll records written, by device, result (newData, noData, failed) and \
                failure code.
                # TYPE keepalive_polls_total counter
                keepalive_polls_total{device="a",result="newData"} 3
                # HELP keepalive_failures_in_a_row Failed records of the device since its last successful one (a poll \
                that found no free connection slot, or a gated poll that did not hear the device, leaves it as it is).
                # TYPE keepalive_failures_in_a_row gauge
                keepalive_failures_in_a_row{device="a"} 2.0

                """, "\(text)")
        for family in MetricFamily.all {
            #expect(!family.help.isEmpty, "\(family.name)")
            #expect(!family.name.hasSuffix("_total"), "\(family.name): the table names families without _total")
            if let unit = family.unit { #expect(family.name.hasSuffix("_" + unit), "\(family.name)") }
            if family.kind == .histogram {
                #expect(family.buckets == family.buckets.sorted() && !family.buckets.isEmpty)
            }
        }
    }

    @Test func openMetricsNamesCounterFamiliesWithoutTotalAndEndsInEOF() {
        let registry = MetricsRegistry()
        Counter(label: "keepalive_mqtt_delivered_total", factory: registry).increment()
        Timer(label: "keepalive_slot_wait_seconds", dimensions: [("adapter", "hci0")], factory: registry)
            .recordMilliseconds(3)
        let text = registry.render(.openMetrics)
        let lines = text.split(separator: "\n").map(String.init)
        #expect(lines.contains("# TYPE keepalive_mqtt_delivered counter"), "\(text)")
        #expect(lines.contains("keepalive_mqtt_delivered_total 1"), "\(text)")
        #expect(lines.contains("# TYPE keepalive_slot_wait_seconds histogram"), "\(text)")
        #expect(lines.contains("# UNIT keepalive_slot_wait_seconds seconds"), "\(text)")
        #expect(lines.last == "# EOF" && text.hasSuffix("# EOF\n"))
        // TYPE, UNIT, HELP, in that order, before the family's samples.
        let type = lines.firstIndex(of: "# TYPE keepalive_slot_wait_seconds histogram") ?? 0
        #expect(
            lines[type + 1].hasPrefix("# UNIT ") && lines[type + 2].hasPrefix("# HELP keepalive_slot_wait_seconds "))
        #expect(!registry.render(.prometheus).contains("# EOF"))
        #expect(registry.render(.prometheus).contains("# TYPE keepalive_mqtt_delivered_total counter"))
    }

    /// Buckets are cumulative and end in +Inf, then the sum and the count; a timer's nanoseconds are seconds.
    @Test func aHistogramsBucketsAreCumulativeWithInfSumAndCount() {
        let registry = MetricsRegistry()
        let timer = Timer(label: "keepalive_link_seconds", dimensions: [("adapter", "hci0")], factory: registry)
        // Binary fractions of a second, so that the sum is exact.
        timer.recordNanoseconds(15_625_000)  // ≤ 0.025
        timer.recordNanoseconds(15_625_000)
        timer.recordMilliseconds(750)  // ≤ 1
        timer.recordSeconds(120)  // beyond every bound
        let samples = registry.render(.prometheus).split(separator: "\n").filter { !$0.hasPrefix("#") }
        #expect(
            samples == [
                #"keepalive_link_seconds_bucket{adapter="hci0",le="0.01"} 0"#,
                #"keepalive_link_seconds_bucket{adapter="hci0",le="0.025"} 2"#,
                #"keepalive_link_seconds_bucket{adapter="hci0",le="0.05"} 2"#,
                #"keepalive_link_seconds_bucket{adapter="hci0",le="0.1"} 2"#,
                #"keepalive_link_seconds_bucket{adapter="hci0",le="0.25"} 2"#,
                #"keepalive_link_seconds_bucket{adapter="hci0",le="0.5"} 2"#,
                #"keepalive_link_seconds_bucket{adapter="hci0",le="1.0"} 3"#,
                #"keepalive_link_seconds_bucket{adapter="hci0",le="2.5"} 3"#,
                #"keepalive_link_seconds_bucket{adapter="hci0",le="5.0"} 3"#,
                #"keepalive_link_seconds_bucket{adapter="hci0",le="10.0"} 3"#,
                #"keepalive_link_seconds_bucket{adapter="hci0",le="30.0"} 3"#,
                #"keepalive_link_seconds_bucket{adapter="hci0",le="+Inf"} 4"#,
                #"keepalive_link_seconds_sum{adapter="hci0"} 120.78125"#,
                #"keepalive_link_seconds_count{adapter="hci0"} 4"#,
            ], "\(samples)")
    }

    /// Device names come from the user's file: a quote, a backslash or a line feed must not end the label.
    @Test func labelValuesAreEscaped() {
        let registry = MetricsRegistry()
        Counter(
            label: "keepalive_advertisements_heard_total", dimensions: [("device", "a \"b\" c\\d\ne")],
            factory: registry
        ).increment()
        for format in [MetricsFormat.prometheus, .openMetrics] {
            #expect(
                registry.render(format).contains(#"keepalive_advertisements_heard_total{device="a \"b\" c\\d\ne"} 1"#),
                "\(registry.render(format))")
        }
    }

    /// One series per set of labels, whatever order they come in; the same counter for the same labels.
    @Test func theSameLabelsInAnotherOrderAreTheSameSeries() {
        let registry = MetricsRegistry()
        Counter(label: "keepalive_polls_total", dimensions: [("device", "a"), ("result", "noData")], factory: registry)
            .increment()
        Counter(label: "keepalive_polls_total", dimensions: [("result", "noData"), ("device", "a")], factory: registry)
            .increment()
        #expect(registry.render(.prometheus).contains(#"keepalive_polls_total{device="a",result="noData"} 2"#))
    }

    /// A label of a library's own, not in the table, still gets a valid name and a HELP.
    @Test func anUnlistedLabelGetsAValidNameAndHelp() {
        let registry = MetricsRegistry()
        Counter(label: "my-app.requests", factory: registry).increment()
        let text = registry.render(.prometheus)
        #expect(text.contains("# HELP my_app_requests_total Reported through swift-metrics as my-app.requests."))
        #expect(text.contains("# TYPE my_app_requests_total counter\nmy_app_requests_total 1\n"), "\(text)")
    }

    @Test func theFormatFollowsAccept() {
        #expect(MetricsFormat(accept: nil) == .prometheus)
        #expect(MetricsFormat(accept: "text/plain;version=0.0.4;q=0.5,*/*;q=0.1") == .prometheus)
        #expect(
            MetricsFormat(accept: "application/openmetrics-text;version=1.0.0,text/plain;version=0.0.4;q=0.5")
                == .openMetrics)
        #expect(MetricsFormat.openMetrics.contentType.hasPrefix("application/openmetrics-text; version=1.0.0"))
    }
}
