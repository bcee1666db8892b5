import Basics
import Testing
@testable import Readings

/// Random input through every decoder: the process must not trap (a trap would end the test
/// run, so reaching the end is the proof), every reading without a value must say why, and
/// names must stay unique. Iterations: KEEPALIVE_FUZZ_ITERATIONS (default 2,000), a tenth of it under
/// ThreadSanitizer (`Sanitizers.rounds`).
@Suite("Fuzz")
struct FuzzTests {
    static var iterations: Int {
        Sanitizers.rounds(environment("KEEPALIVE_FUZZ_ITERATIONS").flatMap { Int($0) }.map { max(1, $0) } ?? 2_000)
    }

    /// Checks the decoder's contract on one result; returns the number of typed errors.
    static func check(_ readings: [Reading], _ context: @autoclosure () -> String) -> Int {
        var errors = 0
        var names: Set<String> = []
        for reading in readings {
            if reading.value == nil && reading.error == nil {
                Issue.record("\(reading.name) has neither value nor error: \(context())")
            }
            if case .number(let number) = reading.value, !number.isFinite {
                Issue.record("\(reading.name) is not finite: \(context())")
            }
            if reading.error != nil { errors += 1 }
            names.insert(reading.name)
        }
        if names.count != readings.count { Issue.record("duplicate reading names: \(context())") }
        return errors
    }

    @Test func readingsDecodingFuzzRandomPayloads() {
        var random = SplitMix64(seed: 0xF022_0001)
        let iterations = Self.iterations
        var typedErrors = 0
        var readingCount = 0
        let numericFormats = ValueFormat.allCases
        for _ in 0..<iterations {
            // Short payloads are the interesting ones; a few long ones too.
            let length = random.next() % 8 == 0 ? Int(random.next() % 64) : Int(random.next() % 16)
            let payload = random.bytes(count: length)
            for entry in SIGCharacteristics.all {
                let readings = ReadingsDecoder.decode(payload, as: .sig(entry.uuid16))
                typedErrors += Self.check(readings, "\(entry.name) \(payload)")
                readingCount += readings.count
            }
            for format in numericFormats {
                let reading = Decode.field(format, payload, at: Int(random.next() % 10))
                typedErrors += Self.check([reading], "\(format) \(payload)")
                readingCount += 1
            }
            let descriptor = random.bytes(count: Int(random.next() % 9))
            if let presentation = try? PresentationFormat(descriptor: descriptor) {
                let readings = ReadingsDecoder.decode(payload, as: .presentation(presentation, name: "p"))
                typedErrors += Self.check(readings, "presentation \(descriptor) \(payload)")
                readingCount += readings.count
            } else {
                typedErrors += 1
            }
        }
        print("fuzz: readings \(iterations) payloads, 0 traps, \(typedErrors) typed errors, \(readingCount) readings")
    }

    @Test func readingsDecodingFuzzRandomLayouts() {
        var random = SplitMix64(seed: 0xF022_0002)
        let iterations = Self.iterations
        var typedErrors = 0
        var validationErrors = 0
        let formats = ValueFormat.allCases
        let names = ["a", "b", "c", "temperature", ""]
        let multipliers: [Double] = [1, 0.5, -2, 1e300, -1e-300, .infinity, .nan, 0]
        for _ in 0..<iterations {
            var fields: [Field] = []
            for _ in 0..<Int(random.next() % 6 + 1) {
                let at = Int(Int64(random.next() % 48) - 4)
                let far = random.next() % 32 == 0
                let minimum = Double(Int64(random.next() % 2000) - 1000)
                let maximum = Double(Int64(random.next() % 2000) - 1000)
                fields.append(
                    Field(
                        name: names[Int(random.next() % UInt64(names.count))],
                        at: far ? Int(bitPattern: UInt(truncatingIfNeeded: random.next())) : at,
                        format: formats[Int(random.next() % UInt64(formats.count))],
                        scale: Scale(
                            multiplier: multipliers[Int(random.next() % UInt64(multipliers.count))],
                            decimalExponent: Int(Int64(random.next() % 801) - 400),
                            binaryExponent: random.next() % 4 == 0 ? Int(Int64(bitPattern: random.next())) : 0
                        ),
                        offset: random.next() % 3 == 0 ? Double(Int64(random.next() % 200) - 100) : 0,
                        unit: random.next() % 2 == 0 ? "u" : nil,
                        valid: random.next() % 2 == 0 ? ValidRange(minimum: minimum, maximum: maximum) : nil
                    ))
            }
            let size: Int? = random.next() % 2 == 0 ? Int(Int64(random.next() % 40) - 2) : nil
            let layout = Layout(fields: fields, size: size)
            let problems = layout.validate()
            validationErrors += problems.count
            for problem in problems where problem.code != .invalidLayout {
                Issue.record("unexpected validation code \(problem.code)")
            }
            let payload = random.bytes(count: Int(random.next() % 24))
            let readings = ReadingsDecoder.decode(payload, as: .layout(layout))
            #expect(readings.count == fields.count)
            for reading in readings {
                if reading.value == nil && reading.error == nil { Issue.record("\(reading.name): no value, no error") }
                if case .number(let number) = reading.value, !number.isFinite { Issue.record("not finite") }
                if reading.error != nil { typedErrors += 1 }
            }
            // Configuration text parsing never traps either.
            let alphabet = Array("0123456789.eE+-x ")
            let text = String(
                (0..<Int(random.next() % 8)).map { _ in alphabet[Int(random.next() % UInt64(alphabet.count))] })
            if (try? Scale(parsing: text)) == nil { typedErrors += 1 }
            if (try? ValueFormat(parsing: text)) == nil { typedErrors += 1 }
        }
        print(
            """
            fuzz: readings \(iterations) layouts, 0 traps, \(typedErrors) typed errors, \(validationErrors) \
            validation errors
            """
        )
    }
}
