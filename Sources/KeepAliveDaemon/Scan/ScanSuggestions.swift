public import Polling
public import Readings
import YAML

/// A configuration entry `keepalive scan --suggest` proposes for one device it recognised.
public struct ScanSuggestion: Sendable, Hashable {
    /// How the daemon would get the device's readings.
    public enum Source: Sendable, Hashable {
        /// Listening to its advertisements: `advertisements: bthome` (the configuration's word for the format),
        /// with a `key:` placeholder when they are encrypted.
        case advertisements(String, keyNeeded: Bool)
        /// Connecting to it with a built-in profile: `profile: mi-flora`.
        case profile(String)
    }

    public var peripheral: Peripheral
    /// The name the device advertises.
    public var deviceName: String?
    public var source: Source
    /// Why: what was heard (`pvvx: temperature 21.3 °C, …`, `named "Flower care"`, `offers Heart Rate 0x180D`).
    public var reason: String
    /// Characteristics to read beside a profile's (the Battery Level of a device that offers the Battery service
    /// too).
    public var reads: [String]
    /// Another way to configure the device, as YAML lines that the output comments out.
    public var alternative: [String]

    public init(
        peripheral: Peripheral, deviceName: String?, source: Source, reason: String, reads: [String] = [],
        alternative: [String] = []
    ) {
        self.peripheral = peripheral
        self.deviceName = deviceName
        self.source = source
        self.reason = reason
        self.reads = reads
        self.alternative = alternative
    }
}

/// The suggesting half of `keepalive scan`: which devices it recognises and the YAML entries for them. Pure.
public enum ScanSuggestions {
    /// MiBeacon product ids with a built-in profile.
    static let miFloraProduct: UInt16 = 0x0098
    static let lywsd03mmcProduct: UInt16 = 0x055B

    /// The SIG services with a built-in profile, the first one a device offers winning.
    static let serviceProfiles: [(service: UInt16, name: String, profile: String)] = [
        (0x180D, "Heart Rate", "heart-rate"),
        (0x1809, "Health Thermometer", "health-thermometer"),
        (0x181A, "Environmental Sensing", "environmental-sensing"),
        (0x180F, "Battery", "battery"),
    ]

    /// The placeholder of a key the user must fill in: the loader refuses it, so it is never silently wrong.
    public static let keyPlaceholder = "<32 hex>"

    /// The entry for a device, or `nil` when it is none this command recognises. Advertisement formats heard come
    /// first (BTHome, pvvx, ATC1441, Ruuvi, then MiBeacon), then the name, then the services offered.
    /// - Parameter payloads: ``ScanDecoding/decode(_:decoder:keys:)`` of `advertisement`.
    public static func suggestion(for advertisement: Advertisement, payloads: [HeardPayload]) -> ScanSuggestion? {
        let peripheral = advertisement.peripheral
        let name = advertisement.name
        func heard(_ payload: HeardPayload) -> String { ScanDecoding.line(payload) }

        for format in [AdvertisementFormat.bthome, .pvvx, .atc1441, .ruuviRAWv2] {
            guard let payload = payloads.first(where: { $0.format == format }) else { continue }
            return ScanSuggestion(
                peripheral: peripheral, deviceName: name,
                source: .advertisements(configurationName(format), keyNeeded: payload.isEncrypted),
                reason: "heard " + heard(payload))
        }
        let products = payloads.filter { $0.format == .mibeacon }
        if let mibeacon = products.first(where: { $0.productID == miFloraProduct }) {
            return ScanSuggestion(
                peripheral: peripheral, deviceName: name, source: .profile("mi-flora"),
                reason: "heard a Mi Flora's " + heard(mibeacon),
                alternative: ["or without connecting, from its MiBeacon advertisements (a reading at a time):"]
                    + mibeaconLines(keyNeeded: mibeacon.isEncrypted))
        }
        if let mibeacon = products.first(where: { $0.productID == lywsd03mmcProduct }) {
            return lywsd03mmc(peripheral, name, reason: "heard a LYWSD03MMC's " + heard(mibeacon))
        }
        if let mibeacon = products.first {
            return ScanSuggestion(
                peripheral: peripheral, deviceName: name,
                source: .advertisements("mibeacon", keyNeeded: mibeacon.isEncrypted), reason: "heard " + heard(mibeacon)
            )
        }

        let lowered = name?.lowercased() ?? ""
        let shown = name.map { "named \"\(JSONText.printable($0))\"" } ?? ""
        if lowered.hasPrefix("flower care") || lowered.hasPrefix("flower mate") {
            return ScanSuggestion(peripheral: peripheral, deviceName: name, source: .profile("mi-flora"), reason: shown)
        }
        if lowered == "lywsd03mmc" {
            return lywsd03mmc(peripheral, name, reason: shown)
        }

        let offered = Set(advertisement.serviceUUIDs.compactMap(\.assignedNumber))
        if let match = serviceProfiles.first(where: { offered.contains($0.service) }) {
            let battery = match.profile != "battery" && offered.contains(0x180F)
            var reason = "offers \(match.name) (\(String(match.service, radix: 16)))"
            if !shown.isEmpty { reason = shown + ", " + reason }
            return ScanSuggestion(
                peripheral: peripheral, deviceName: name, source: .profile(match.profile),
                reason: reason + (battery ? " and Battery (180f)" : ""), reads: battery ? ["2a19"] : [])
        }
        return nil
    }

    private static func lywsd03mmc(_ peripheral: Peripheral, _ name: String?, reason: String) -> ScanSuggestion {
        ScanSuggestion(
            peripheral: peripheral, deviceName: name, source: .profile("lywsd03mmc"), reason: reason,
            alternative: [
                "or without connecting, from its encrypted MiBeacon advertisements (the bind key from Xiaomi's cloud):"
            ] + mibeaconLines(keyNeeded: true))
    }

    private static func mibeaconLines(keyNeeded: Bool) -> [String] {
        ["advertisements: mibeacon"] + (keyNeeded ? ["key: \(keyPlaceholder)"] : [])
    }

    /// The word the configuration's `advertisements:` uses for `format`.
    public static func configurationName(_ format: AdvertisementFormat) -> String {
        switch format {
        case .bthome: "bthome"
        case .pvvx: "pvvx"
        case .atc1441: "atc1441"
        case .mibeacon: "mibeacon"
        case .ruuviRAWv2: "ruuvi"
        }
    }

    /// The entries as YAML, indented to go under `devices:` as in Examples/keepalive.yaml, each after a comment
    /// saying what was heard; names are slugs of the device names (or addresses), unique within the output.
    public static func yaml(_ suggestions: [ScanSuggestion]) -> String {
        let names = uniqueNames(suggestions.map { ($0.deviceName, $0.peripheral.address) })
        var lines: [String] = []
        for (suggestion, name) in zip(suggestions, names) {
            lines.append("  # " + comment(suggestion.reason))
            lines.append("  - name: \(name)")
            lines.append("    address: \(suggestion.peripheral.address)")
            lines.append("    adapter: \(suggestion.peripheral.adapter)")
            switch suggestion.source {
            case .advertisements(let format, let keyNeeded):
                lines.append("    advertisements: \(format)")
                if keyNeeded { lines.append("    key: \(keyPlaceholder)  # needed: encrypted") }
            case .profile(let profile):
                lines.append("    profile: \(profile)")
            }
            if !suggestion.reads.isEmpty {
                lines.append("    read: [\(suggestion.reads.joined(separator: ", "))]")
            }
            for line in suggestion.alternative { lines.append("    # " + comment(line)) }
        }
        return lines.map { $0 + "\n" }.joined()
    }

    /// A comment's text on one line (a name off the air may hold anything).
    private static func comment(_ text: String) -> String {
        JSONText.printable(text)
    }

    /// Slugs of the names (or, for a device without one, of its address), made unique: a slug several devices
    /// share takes the last four hex digits of each address, and a number if that is not enough.
    public static func uniqueNames(_ devices: [(name: String?, address: String)]) -> [String] {
        let bases = devices.map { slug($0.name, address: $0.address) }
        var counts: [String: Int] = [:]
        for base in bases { counts[base, default: 0] += 1 }
        var used: Set<String> = []
        var names: [String] = []
        for (base, device) in zip(bases, devices) {
            var name = base
            if counts[base, default: 0] > 1 {
                let digits = device.address.lowercased().filter { $0 != ":" }
                name += "-" + digits.suffix(4)
            }
            var candidate = name
            var number = 2
            while !used.insert(candidate).inserted {
                candidate = "\(name)-\(number)"
                number += 1
            }
            names.append(candidate)
        }
        return names
    }

    /// `LYWSD03MMC` → `lywsd03mmc`, `Flower care` → `flower-care`; lower-case letters, digits and single hyphens.
    /// Without a usable name: `device-` and the address's digits. A slug YAML would read as something other than
    /// text (`yes`, `1234`) gets `device-` in front.
    public static func slug(_ name: String?, address: String) -> String {
        var slug = ""
        for character in (name ?? "").lowercased().unicodeScalars {
            if ("a"..."z").contains(character) || ("0"..."9").contains(character) {
                slug.unicodeScalars.append(character)
            } else if !slug.isEmpty, !slug.hasSuffix("-") {
                slug += "-"
            }
        }
        while slug.hasSuffix("-") { slug.removeLast() }
        if slug.isEmpty { return "device-" + address.lowercased().filter { $0 != ":" } }
        if YAMLTag.resolve(plain: slug) != .str { return "device-" + slug }
        return slug
    }
}
