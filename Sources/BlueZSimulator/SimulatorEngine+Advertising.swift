import DBus
import Readings

// Passive sensors advertising while their adapter discovers, reported as bluetoothd 5.66 reports an advertising
// report (src/adapter.c, update_found_devices; src/device.c):
// - a device not on the bus yet appears (InterfacesAdded with its RSSI and data);
// - RSSI: with a filtered discovery (some discovering client called SetDiscoveryFilter) every advertisement sets it
//   (device_set_rssi_with_delta with a threshold of 0, which emits even an unchanged value); without, only a change
//   of 8 dBm or more does;
// - ServiceData / ManufacturerData: with DuplicateData (some discovering client's filter) the device's data is
//   cleared and set again, so every advertisement emits it, changed or not; without, an element emits only when its
//   bytes changed;
// - what one advertisement changes goes out in one PropertiesChanged (gdbus sends the changes of one main-loop
//   iteration together).

/// What one advertisement did on the bus.
struct AdvertisementSighting: Sendable {
    let path: ObjectPath
    /// The device was not on the bus: it appears with everything.
    let appeared: Bool
    let changed: [String: DBusValue]
}

extension SimulatorEngine {
    /// The shortest pause of the advertising loop: advertisements due within it go out in one round, so that
    /// 1,000 advertisements a second cost at most 100 rounds.
    static let advertisingTick: Duration = .milliseconds(10)

    /// While `name` discovers: every passive sensor on it advertises once per (scaled) interval.
    func advertise(adapter name: String, generation: Int) async {
        try? await Task.sleep(for: scaled(configuration.latencies.discovery))
        let clock = ContinuousClock()
        var failures = Set<ObjectPath>()
        while !Task.isCancelled {
            let now = clock.now
            let round = model.withLock { model in
                model.advertisingRound(
                    adapter: name, generation: generation, now: now, timeScale: configuration.timeScale)
            }
            for (path, error) in round.failures where failures.insert(path).inserted {
                logger.warning("\(path) cannot advertise: \(error)")
            }
            if !round.sightings.isEmpty { await report(round.sightings) }
            // Nothing to advertise: look again in a second (devices can be added while discovering).
            let wake = max(round.next ?? now + .seconds(1), clock.now + Self.advertisingTick)
            try? await Task.sleep(until: wake, clock: clock)
        }
    }

    /// Sends a round's signals through one hop to the connection.
    private func report(_ sightings: [AdvertisementSighting]) async {
        let objects = sightings.filter(\.appeared).map { ($0.path, deviceObject($0.path, battery: false)) }
        await emit { connection in
            // Checked on the connection, in order with a stop's Discovering=false (see `discover`).
            guard !Task.isCancelled else { return }
            for (path, object) in objects { try await connection.export(object, at: path) }
            for sighting in sightings where !sighting.appeared {
                try connection.propertiesChanged(
                    path: sighting.path, interface: Self.deviceInterface, changed: sighting.changed)
            }
        }
    }
}

extension Model {
    /// One round of the advertising loop at `now`: the advertisements due, applied to the model, and when the next
    /// one is due.
    mutating func advertisingRound(
        adapter name: String, generation: Int, now: ContinuousClock.Instant, timeScale: Double
    ) -> (sightings: [AdvertisementSighting], next: ContinuousClock.Instant?, failures: [(ObjectPath, AESCCMError)]) {
        guard self.generation == generation, let adapter = adapters[name], adapter.discovering,
            !adapter.discoveryStuck
        else { return ([], nil, []) }
        let duplicateData = adapter.duplicateData
        let rssiThreshold = adapter.filteredDiscovery ? 0 : 8
        var sightings: [AdvertisementSighting] = []
        var failures: [(ObjectPath, AESCCMError)] = []
        var next: ContinuousClock.Instant?
        for index in advertisers.indices where advertisers[index].adapter == name {
            let interval = advertisers[index].profile.interval * timeScale
            guard let due = advertisers[index].due else {
                // The first advertisement of a discovery: spread over one interval, so that many sensors do not
                // all speak at once.
                let first = now + interval * (Double((index &* 37) % 100) / 100)
                advertisers[index].due = first
                next = min(next ?? first, first)
                continue
            }
            guard due <= now else {
                next = min(next ?? due, due)
                continue
            }
            // Late by more than an interval (a busy host): no burst to catch up.
            let following = due + interval > now ? due + interval : now + interval
            advertisers[index].due = following
            next = min(next ?? following, following)
            let path = advertisers[index].path
            guard let device = devices[path], device.advertising, !device.blocked else { continue }
            do {
                if let sighting = try advertiseOnce(index, rssiThreshold: rssiThreshold, duplicateData: duplicateData) {
                    sightings.append(sighting)
                }
            } catch {
                failures.append((path, error))
            }
        }
        return (sightings, next, failures)
    }

    /// Advertiser `index` sends its next advertisement: the device's RSSI and data change as bluetoothd changes
    /// them, and the sighting says what to emit (nil: nothing changed that bluetoothd would report).
    private mutating func advertiseOnce(_ index: Int, rssiThreshold: Int, duplicateData: Bool) throws(AESCCMError)
        -> AdvertisementSighting?
    {
        let sequence = advertisers[index].sent
        advertisers[index].sent += 1
        let profile = advertisers[index].profile
        let measurement = sequence / UInt64(profile.repeats)
        let packet: AdvertisedPacket
        if let cached = advertisers[index].packet, cached.measurement == measurement {
            packet = cached.packet
        } else {
            packet = try profile.packet(sequence, address: advertisers[index].address)
            advertisers[index].packet = (measurement, packet)
        }
        let path = advertisers[index].path
        guard var device = devices[path] else { return nil }
        defer { devices[path] = device }
        let rssi = device.configuration.rssi + Int16(truncatingIfNeeded: sequence % 5) - 2
        var changed: [String: DBusValue] = [:]
        if let previous = device.rssi, previous != 0, rssi != 0 {
            if abs(Int(previous) - Int(rssi)) >= rssiThreshold {
                device.rssi = rssi
                changed["RSSI"] = .int16(rssi)
            }
        } else if device.rssi != rssi {
            device.rssi = rssi
            changed["RSSI"] = .int16(rssi)
        }
        switch packet {
        case .serviceData(let uuid, let bytes):
            if duplicateData {
                device.serviceData = [uuid: bytes]
            } else if device.serviceData[uuid] != bytes {
                device.serviceData[uuid] = bytes
            } else {
                break
            }
            changed["ServiceData"] = .dictionary(
                key: "s", value: "v",
                device.serviceData.sorted { $0.key < $1.key }.map {
                    DBusDictionaryEntry(key: .string($0.key), value: .variant(.bytes($0.value)))
                })
        case .manufacturerData(let company, let bytes):
            if duplicateData {
                device.manufacturerData = [company: bytes]
            } else if device.manufacturerData[company] != bytes {
                device.manufacturerData[company] = bytes
            } else {
                break
            }
            changed["ManufacturerData"] = .dictionary(
                key: "q", value: "v",
                device.manufacturerData.sorted { $0.key < $1.key }.map {
                    DBusDictionaryEntry(key: .uint16($0.key), value: .variant(.bytes($0.value)))
                })
        }
        if !device.exported {
            device.exported = true
            return AdvertisementSighting(path: path, appeared: true, changed: [:])
        }
        return changed.isEmpty ? nil : AdvertisementSighting(path: path, appeared: false, changed: changed)
    }

    /// Forgets when the advertisers of `name` are due: the next discovery starts them afresh.
    mutating func resetAdvertising(adapter name: String) {
        for index in advertisers.indices where advertisers[index].adapter == name { advertisers[index].due = nil }
    }
}
