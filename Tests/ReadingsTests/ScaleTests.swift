import Testing
@testable import Readings

@Suite("Scale")
struct ScaleTests {
    @Test func parsingKeepsPowersOfTenExact() throws {
        let cases: [(String, Double, Int)] = [
            ("0.1", 1, -1), ("0.01", 1, -2), ("1e-2", 1, -2), ("1E-2", 1, -2), ("0.005", 5, -3), ("1000", 1, 3),
            ("2.5", 25, -1), ("-0.5", -5, -1), ("+3", 3, 0), ("1", 1, 0), ("0.50", 5, -1), ("10e-3", 1, -2),
            (".25", 25, -2),
            ("1.", 1, 0), ("1e+3", 1, 3),
        ]
        for (text, multiplier, exponent) in cases {
            let scale = try Scale(parsing: text)
            #expect(scale.multiplier == multiplier, "\(text)")
            #expect(scale.decimalExponent == exponent, "\(text)")
            #expect(scale.binaryExponent == 0, "\(text)")
        }
    }

    @Test func applyingDividesSoTheResultIsTheNearestDouble() throws {
        let hundredth = try Scale(parsing: "0.01")
        #expect(hundredth.apply(to: 2154) == 21.54)
        #expect(hundredth.apply(to: 35) == 0.35)
        let plainMultiplier = 0.01
        #expect(35 * plainMultiplier != 0.35)  // the bug a plain multiplier has
        #expect(hundredth.apply(to: 35) == Scale(multiplier: 35, decimalExponent: -2).apply(to: 1))
        #expect(try Scale(parsing: "1e-2").apply(to: -50) == -0.5)
        #expect(try Scale(parsing: "0.1").apply(to: 3) == 0.3)
        #expect(try Scale(parsing: "0.005").apply(to: 14890) == 74.45)
        #expect(Scale(binaryExponent: -10).apply(to: 512) == 0.5)
        #expect(Scale(multiplier: 0.25).apply(to: 8) == 2)
        #expect(Scale.identity.isIdentity && !hundredth.isIdentity)
    }

    @Test func parsingRejectsWhatIsNotADecimalNumber() {
        for text in [
            "", "abc", "1.2.3", "0", "0.000", "1e", "1e999", "e5", "-", "1,5", "0x10", "1234567890123456", "١",
        ] {
            #expect {
                _ = try Scale(parsing: text)
            } throws: { error in
                guard let error = error as? ReadingError else { return false }
                return error.code == .invalidScale && error.message.contains("\"\(text)\"")
            }
        }
    }
}
