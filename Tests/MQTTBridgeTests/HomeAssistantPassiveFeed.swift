import Basics
import Foundation
import MQTT
import MQTTBridge
import Readings
import Testing

/// Not a test of its own: the passive device `make ha-check` (Tests/HomeAssistant/ha_check.py) shows a real Home
/// Assistant, until the daemon hears advertisements itself. Runs only with `KEEPALIVE_HA_FEED_PORT` (the check's
/// broker) and `KEEPALIVE_HA_FEED_DIR` (a spool directory): a bridge for gateway `gw-passive` with one passive
/// device, `tag`, that submits the records of a BTHome-like sensor, the next one each time a "poll now" command
/// for `tag` arrives, and returns after the last.
@Suite struct HomeAssistantPassiveFeed {
    static let environment = ProcessInfo.processInfo.environment

    /// One advertisement: its packet id, its readings as (name, JSON value, unit), the RSSI.
    struct Packet {
        var id: UInt32
        var button = "none"
        var dimmer = "none"
        var steps: Int64 = 0
        var door = false
        var motion = false
    }

    static let packets: [Packet] = [
        Packet(id: 1),
        Packet(id: 2, button: "press", door: true, motion: true),
        Packet(id: 2, button: "press", door: true, motion: true),  // the same packet again: no second event
        Packet(id: 3, button: "double_press", dimmer: "rotate_left", steps: 3),
    ]

    static func readings(_ packet: Packet) -> [Reading] {
        [
            Reading(name: "temperature", value: .number(21.5), unit: "°C"),
            Reading(name: "humidity", value: .number(48.25), unit: "%"),
            Reading(name: "pressure", value: .number(1008.5), unit: "hPa"),
            Reading(name: "illuminance", value: .number(312.5), unit: "lx"),
            Reading(name: "voltage", value: .number(3.012), unit: "V"),
            Reading(name: "co2", value: .unsigned(612), unit: "ppm"),
            Reading(name: "pm2_5", value: .unsigned(8), unit: "\u{00B5}g/m³"),
            Reading(name: "battery", value: .unsigned(87), unit: "%"),
            Reading(name: "energy", value: .number(1.234), unit: "kWh"),
            Reading(name: "acceleration", value: .number(9.81), unit: "m/s²"),
            Reading(name: "door", value: .boolean(packet.door)),
            Reading(name: "window", value: .boolean(false)),
            Reading(name: "motion", value: .boolean(packet.motion)),
            Reading(name: "moisture_detected", value: .boolean(false)),
            Reading(name: "battery_low", value: .boolean(false)),
            Reading(name: "opening", value: .boolean(true)),
            Reading(name: "button", value: .text(packet.button)),
            Reading(name: "dimmer", value: .text(packet.dimmer)),
            Reading(name: "dimmer_steps", value: .integer(packet.steps)),
        ]
    }

    /// The record's JSON line as the daemon writes it (readings, and the advertisement's fields).
    static func line(_ sequence: UInt64, _ packet: Packet) -> [UInt8] {
        let members = readings(packet).map { reading -> String in
            let value: String
            switch reading.value {
            case .boolean(let flag): value = flag ? "true" : "false"
            case .text(let text): value = "\"\(text)\""
            case let other?: value = other.description
            case nil: value = "null"
            }
            return "\"\(reading.name)\":{\"value\":\(value)" + (reading.unit.map { ",\"unit\":\"\($0)\"" } ?? "") + "}"
        }
        return Array(
            ("{\"seq\":\(sequence),\"device\":\"tag\",\"result\":\"newData\",\"source\":\"advertisement\","
                + "\"rssi\":-67,\"packet_id\":\(packet.id),\"readings\":{" + members.joined(separator: ",") + "}}")
                .utf8)
    }

    @Test(.enabled(if: environment["KEEPALIVE_HA_FEED_PORT"] != nil))
    func feedAPassiveDeviceToHomeAssistant() async throws {
        let port = try #require(Self.environment["KEEPALIVE_HA_FEED_PORT"].flatMap { Int($0) })
        let directory = try #require(Self.environment["KEEPALIVE_HA_FEED_DIR"])
        let configuration = BridgeConfiguration(
            mqtt: MQTTConfiguration(host: "127.0.0.1", port: port, clientID: "keepalive-gw-passive"),
            gateway: "gw-passive", spoolDirectory: directory, syncPolicy: .never)
        let device = BridgeDevice(name: "tag", address: "C0:FF:EE:0A:00:01", interval: .seconds(60), passive: true)
        let bridge = try MQTTBridge(configuration: configuration, devices: [device], logger: testLogger())
        let running = RunningBridge(bridge)
        try await running.waitUntilConnected()
        let sequence = Locked<UInt64>(0)
        @Sendable func submit(_ index: Int) throws {
            let packet = Self.packets[index]
            let seq = sequence.withLock { value in
                defer { value += 1 }
                return value
            }
            try bridge.submit(
                device: "tag", sequence: seq, succeeded: true, readings: Self.readings(packet),
                advertisement: BridgeAdvertisement(packetID: packet.id), payload: Self.line(seq, packet))
        }
        // The first packet again every 2 s until the first command, as a device repeats its advertisement: HA
        // subscribes to the state topic only once it made the entities, after the first record went by.
        let repeating = Task {
            while !Task.isCancelled {
                try? submit(0)
                try? await Task.sleep(for: .seconds(2))
            }
        }
        var next = 1
        for await command in bridge.commands {
            guard case .pollNow("tag") = command else { continue }
            if next == 1 {
                repeating.cancel()
                await repeating.value
            }
            if next == Self.packets.count { break }
            try submit(next)
            next += 1
        }
        try await running.waitUntilDrained()
        await running.stop()
    }
}
