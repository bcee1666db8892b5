import Basics
import ArgumentParser
import KeepAlive
import KeepAliveDaemon

/// `keepalive profiles`: the shipped device profiles and what each one polls and decodes.
struct ProfilesCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "profiles",
        abstract: "List the device profiles a configuration can name with `profile:`.",
        discussion: """
            Each profile says what a poll writes, reads and listens to, how the bytes become readings, and for \
            some sensors how to download their own log (`history:`) and set their clock (`clock_sync:`). A \
            device with `profile: NAME` gets all of it; its own read/write/notify entries and its `fields:` \
            overrides go on top (README: Readings).
            """
    )

    @Flag(name: .long, help: "One JSON object per profile instead of text.")
    var json = false

    func run() throws {
        let profiles: [DeviceProfile]
        switch DeviceProfile.builtIn() {
        case .success(let list): profiles = list
        case .failure(let error): throw CommandFailure("a shipped profile does not parse: \(error)")
        }
        for profile in profiles {
            writeOut((json ? Self.json(profile) : Self.text(profile)) + "\n")
        }
    }

    static func text(_ profile: DeviceProfile) -> String {
        var lines = [
            profile.name + (profile.model.map { "  \(profile.manufacturer.map { "\($0) " } ?? "")\($0)" } ?? "")
        ]
        if let summary = profile.summary { lines.append("  \(summary)") }
        if !profile.writes.isEmpty {
            lines.append(
                "  writes    "
                    + profile.writes.map { "\($0.characteristic.shortDescription)=\(hex($0.value))" }.joined(
                        separator: ", "))
        }
        if !profile.reads.isEmpty {
            lines.append("  reads     " + profile.reads.map(\.shortDescription).joined(separator: ", "))
        }
        if !profile.notifications.isEmpty {
            lines.append(
                "  listens   "
                    + profile.notifications.map { "\($0.characteristic.shortDescription) for \($0.duration.compact)" }
                    .joined(separator: ", "))
        }
        lines.append(
            "  readings  "
                + profile.readings.map { $0.name + ($0.unit.map { " (\($0))" } ?? "") }.joined(separator: ", "))
        // What a device's `history:` and `clock_sync:` use (README: Sensor history and clocks).
        if let history = profile.history {
            lines.append("  history   \(history.rawValue): the sensor's own log, downloaded with `history:`")
        }
        if let clock = profile.clock {
            let uuid = clock.characteristic.shortDescription
            lines.append("  clock     \(uuid) (\(clock.format.rawValue)), set with `clock_sync:`")
        }
        return lines.joined(separator: "\n")
    }

    static func json(_ profile: DeviceProfile) -> String {
        func strings(_ values: [String]) -> String { "[" + values.map(JSONText.quoted).joined(separator: ",") + "]" }
        var members = ["\"name\":" + JSONText.quoted(profile.name)]
        if let manufacturer = profile.manufacturer {
            members.append("\"manufacturer\":" + JSONText.quoted(manufacturer))
        }
        if let model = profile.model { members.append("\"model\":" + JSONText.quoted(model)) }
        if let summary = profile.summary { members.append("\"description\":" + JSONText.quoted(summary)) }
        members.append(
            "\"writes\":" + strings(profile.writes.map { "\($0.characteristic.shortDescription)=\(hex($0.value))" }))
        members.append("\"reads\":" + strings(profile.reads.map(\.shortDescription)))
        members.append("\"notify\":" + strings(profile.notifications.map(\.characteristic.shortDescription)))
        let readings = profile.readings.map { reading in
            "{\"name\":" + JSONText.quoted(reading.name)
                + (reading.unit.map { ",\"unit\":" + JSONText.quoted($0) } ?? "") + "}"
        }
        members.append("\"readings\":[" + readings.joined(separator: ",") + "]")
        if let history = profile.history { members.append("\"history\":" + JSONText.quoted(history.rawValue)) }
        if let clock = profile.clock {
            members.append(
                "\"clock\":{\"uuid\":" + JSONText.quoted(clock.characteristic.shortDescription) + ",\"format\":"
                    + JSONText.quoted(clock.format.rawValue) + "}")
        }
        return "{" + members.joined(separator: ",") + "}"
    }

    private static func hex(_ bytes: [UInt8]) -> String {
        Hex.string(bytes)
    }
}
