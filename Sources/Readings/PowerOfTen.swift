/// Exact-as-possible scaling by powers of ten, without Foundation's `pow`.
///
/// Every power of ten up to 10^22 is exactly representable in a `Double`, so multiplying or
/// dividing an exactly-representable integer by one of them rounds once, giving the `Double`
/// nearest the decimal value (35 / 100 is the `Double` nearest 0.35; 35 × 0.01 is
/// 0.35000000000000003, because 0.01 itself is already rounded). Beyond 10^22 the factor is applied in steps;
/// such magnitudes only occur with extreme exponents where the last bit no longer matters.
enum PowerOfTen {
    /// 10^0 … 10^22, all exact.
    static let exact: [Double] = [
        1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11,
        1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22,
    ]

    /// `value × 10^exponent`, dividing for negative exponents.
    static func scale(_ value: Double, by exponent: Int) -> Double {
        if exponent == 0 { return value }
        var result = value
        var remaining = exponent.magnitude
        // For |exponent| <= 22 this loop does nothing and the single step below rounds once.
        while remaining > 22, result.isFinite, result != 0 {
            result = exponent > 0 ? result * 1e22 : result / 1e22
            remaining -= 22
        }
        // Overflowed to infinity or underflowed to zero: no further factor changes it.
        guard remaining <= 22 else { return result }
        let factor = exact[Int(remaining)]
        return exponent > 0 ? result * factor : result / factor
    }
}
