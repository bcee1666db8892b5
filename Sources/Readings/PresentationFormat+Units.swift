extension PresentationFormat {
    /// Unit UUIDs of Assigned Numbers ("Units", 0x2700…) to symbols, checked against the
    /// Assigned Numbers unit list. Ambiguous UUIDs (several units share a symbol, e.g. 0x2715
    /// density and 0x271B mass concentration are both kg/m³) map to the same symbol on purpose.
    static let unitSymbols: [UInt16: String] = [
        0x2701: "m",  // length (metre)
        0x2702: "kg",  // mass (kilogram)
        0x2703: "s",  // time (second)
        0x2704: "A",  // electric current (ampere)
        0x2705: "K",  // thermodynamic temperature (kelvin)
        0x2706: "mol",  // amount of substance (mole)
        0x2707: "cd",  // luminous intensity (candela)
        0x2710: "m²",  // area (square metres)
        0x2711: "m³",  // volume (cubic metres)
        0x2712: "m/s",  // velocity
        0x2713: "m/s²",  // acceleration
        0x2714: "1/m",  // wavenumber (reciprocal metre)
        0x2715: "kg/m³",  // density
        0x2716: "kg/m²",  // surface density
        0x2717: "m³/kg",  // specific volume
        0x2718: "A/m²",  // current density
        0x2719: "A/m",  // magnetic field strength
        0x271A: "mol/m³",  // amount concentration
        0x271B: "kg/m³",  // mass concentration
        0x271C: "cd/m²",  // luminance
        0x2720: "rad",  // plane angle (radian)
        0x2721: "sr",  // solid angle (steradian)
        0x2722: "Hz",  // frequency (hertz)
        0x2723: "N",  // force (newton)
        0x2724: "Pa",  // pressure (pascal)
        0x2725: "J",  // energy (joule)
        0x2726: "W",  // power (watt)
        0x2727: "C",  // electric charge (coulomb)
        0x2728: "V",  // electric potential difference (volt)
        0x2729: "F",  // capacitance (farad)
        0x272A: "Ω",  // electric resistance (ohm)
        0x272B: "S",  // electric conductance (siemens)
        0x272C: "Wb",  // magnetic flux (weber)
        0x272D: "T",  // magnetic flux density (tesla)
        0x272E: "H",  // inductance (henry)
        0x272F: "°C",  // Celsius temperature (degree Celsius)
        0x2730: "lm",  // luminous flux (lumen)
        0x2731: "lx",  // illuminance (lux)
        0x2732: "Bq",  // activity referred to a radionuclide (becquerel)
        0x2733: "Gy",  // absorbed dose (gray)
        0x2734: "Sv",  // dose equivalent (sievert)
        0x2735: "kat",  // catalytic activity (katal)
        0x2740: "Pa·s",  // dynamic viscosity (pascal second)
        0x2741: "N·m",  // moment of force (newton metre)
        0x2742: "N/m",  // surface tension
        0x2743: "rad/s",  // angular velocity
        0x2744: "rad/s²",  // angular acceleration
        0x2745: "W/m²",  // heat flux density
        0x2746: "J/K",  // heat capacity
        0x2747: "J/(kg·K)",  // specific heat capacity
        0x2748: "J/kg",  // specific energy
        0x2749: "W/(m·K)",  // thermal conductivity
        0x274A: "J/m³",  // energy density
        0x274B: "V/m",  // electric field strength
        0x2760: "min",  // time (minute)
        0x2761: "h",  // time (hour)
        0x2762: "d",  // time (day)
        0x2763: "°",  // plane angle (degree)
        0x2764: "′",  // plane angle (minute)
        0x2765: "″",  // plane angle (second)
        0x2766: "ha",  // area (hectare)
        0x2767: "L",  // volume (litre)
        0x2768: "t",  // mass (tonne)
        0x2780: "bar",  // pressure (bar)
        0x2781: "mmHg",  // pressure (millimetre of mercury)
        0x2782: "Å",  // length (ångström)
        0x2783: "NM",  // length (nautical mile)
        0x2784: "b",  // area (barn)
        0x2785: "kn",  // velocity (knot)
        0x2786: "Np",  // logarithmic radio quantity (neper)
        0x2787: "B",  // logarithmic radio quantity (bel)
        0x27A0: "yd",  // length (yard)
        0x27A1: "pc",  // length (parsec)
        0x27A2: "in",  // length (inch)
        0x27A3: "ft",  // length (foot)
        0x27A4: "mi",  // length (mile)
        0x27A5: "psi",  // pressure (pound-force per square inch)
        0x27A6: "km/h",  // velocity (kilometre per hour)
        0x27A7: "mph",  // velocity (mile per hour)
        0x27A8: "rpm",  // angular velocity (revolution per minute)
        0x27A9: "cal",  // energy (gram calorie)
        0x27AA: "kcal",  // energy (kilogram calorie)
        0x27AB: "kWh",  // energy (kilowatt hour)
        0x27AC: "°F",  // thermodynamic temperature (degree Fahrenheit)
        0x27AD: "%",  // percentage
        0x27AE: "‰",  // per mille
        0x27AF: "bpm",  // period (beats per minute)
        0x27B0: "Ah",  // electric charge (ampere hours)
        0x27B1: "mg/dL",  // mass density (milligram per decilitre)
        0x27B2: "mmol/L",  // mass density (millimole per litre)
        0x27B3: "a",  // time (year)
        0x27B4: "mo",  // time (month)
        0x27B5: "1/m³",  // concentration (count per cubic metre)
        0x27B6: "W/m²",  // irradiance (watt per square metre)
        0x27B7: "mL/(kg·min)",  // milliliter per kilogram per minute
        0x27B8: "lb",  // mass (pound)
        0x27C4: "ppm",  // concentration (parts per million)
        0x27C5: "ppb",  // concentration (parts per billion)
    ]

    /// The symbol of an Assigned Numbers unit UUID: `°C` for 0x272F, `%` for 0x27AD, `bpm` for
    /// 0x27AF. `nil` for 0x2700 (unitless) and for units not in the table.
    public static func unitSymbol(for unit: UInt16) -> String? {
        unitSymbols[unit]
    }
}
