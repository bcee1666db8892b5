/// The factor a raw value is multiplied by, in the GSS notation `M × 10^d × 2^b`.
///
/// Keeping the decimal exponent separate keeps power-of-ten scales exact: a scale parsed from
/// "0.01" is `d = -2`, and applying it *divides* by 100, so raw 35 gives exactly the `Double`
/// nearest 0.35 (never 35 × 0.01 = 0.35000000000000003). Binary exponents cover GSS values
/// such as RR intervals in 1/1024 s (`b = -10`); ``multiplier`` covers `M` (Weight's 0.005 kg is
/// `M = 5, d = -3`) and any arbitrary factor a configuration needs.
public struct Scale: Sendable, Hashable, CustomStringConvertible {
    /// `M`: an integer in GSS, any finite number in a configuration.
    public var multiplier: Double
    /// `d`: the power of ten.
    public var decimalExponent: Int
    /// `b`: the power of two.
    public var binaryExponent: Int

    /// Creates `multiplier × 10^decimalExponent × 2^binaryExponent`.
    public init(multiplier: Double = 1, decimalExponent: Int = 0, binaryExponent: Int = 0) {
        self.multiplier = multiplier
        self.decimalExponent = decimalExponent
        self.binaryExponent = binaryExponent
    }

    /// The scale that leaves values unchanged.
    public static let identity = Scale()

    /// Whether applying the scale leaves every value unchanged.
    public var isIdentity: Bool { multiplier == 1 && decimalExponent == 0 && binaryExponent == 0 }

    /// Applies the scale: `value × M × 2^b`, then × or ÷ 10^|d|.
    public func apply(to value: Double) -> Double {
        apply(to: value, extraDecimalExponent: 0)
    }

    /// Applies the scale to `mantissa × 10^extraDecimalExponent` (an IEEE-11073 number or a
    /// presentation exponent), folding both powers of ten into one exact division or multiplication.
    func apply(to mantissa: Double, extraDecimalExponent: Int) -> Double {
        var result = mantissa
        if multiplier != 1 { result *= multiplier }
        if binaryExponent != 0 {
            // Clamped so the power stays a finite normal Double; multiplying by it is exact.
            let clamped = max(-1022, min(1023, binaryExponent))
            result *= Double(sign: .plus, exponent: clamped, significand: 1)
        }
        let exponent = decimalExponent.addingReportingOverflow(extraDecimalExponent)
        return PowerOfTen.scale(result, by: exponent.overflow ? decimalExponent : exponent.partialValue)
    }

    /// The factor as one `Double` (rounded; for display and for arbitrary multipliers only).
    public var factor: Double { apply(to: 1) }

    public var description: String {
        var text = multiplier == 1 ? "1" : "\(multiplier)"
        if decimalExponent != 0 { text += "e\(decimalExponent)" }
        if binaryExponent != 0 { text += "×2^\(binaryExponent)" }
        return text
    }
}

extension Scale {
    /// Parses a configuration scale written as a decimal number: `0.1`, `0.01`, `1e-2`, `0.005`,
    /// `2.5`, `1000`, `-1`.
    ///
    /// The digits become an exact integer multiplier and a decimal exponent, trailing zeros moved
    /// into the exponent: `0.01` is `1 × 10^-2`, `0.005` is `5 × 10^-3`, `1000` is `1 × 10^3`.
    /// - Throws: ``ReadingError/Code/invalidScale`` when the text is not such a number, has more
    ///   than 15 significant digits (so the multiplier stays exact), or is zero.
    public init(parsing text: String) throws(ReadingError) {
        func invalid(_ why: String) -> ReadingError {
            ReadingError(.invalidScale, "scale \"\(text)\" \(why); write a decimal number such as 0.01 or 1e-2")
        }
        var characters = Substring(text)
        var negative = false
        if let first = characters.first, first == "-" || first == "+" {
            negative = first == "-"
            characters = characters.dropFirst()
        }
        var mantissa: Int64 = 0
        var exponent = 0
        var digitCount = 0
        var significantDigits = 0
        var seenPoint = false
        while let character = characters.first, character != "e", character != "E" {
            characters = characters.dropFirst()
            if character == "." {
                guard !seenPoint else { throw invalid("has two decimal points") }
                seenPoint = true
                continue
            }
            guard let digit = character.wholeNumberValue, character.isASCII else {
                throw invalid("has the character \"\(character)\"")
            }
            digitCount += 1
            if mantissa == 0 && digit == 0 {
                if seenPoint { exponent -= 1 }
                continue
            }
            significantDigits += 1
            guard significantDigits <= 15 else { throw invalid("has more than 15 significant digits") }
            mantissa = mantissa * 10 + Int64(digit)
            if seenPoint { exponent -= 1 }
        }
        guard digitCount > 0 else { throw invalid("has no digits") }
        if !characters.isEmpty {
            characters = characters.dropFirst()  // the "e"
            guard let written = Int(characters), (-300...300).contains(written) else {
                throw invalid("has an exponent that is not a whole number between -300 and 300")
            }
            exponent += written
        }
        guard mantissa != 0 else { throw invalid("is zero") }
        while mantissa % 10 == 0 {
            mantissa /= 10
            exponent += 1
        }
        self.init(multiplier: Double(negative ? -mantissa : mantissa), decimalExponent: exponent)
    }
}
