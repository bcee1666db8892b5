// The state of devices with a memory of their own (SimulatedHistory.swift), for tests that check what a client
// downloaded or set: the Mi Flora's history, the LYWSD03MMC's clock. Also on the control interface.

extension BlueZSimulator {
    /// Replaces the Mi Flora's stored history by `count` hourly entries (serials from 0), the newest at the last
    /// whole hour of its clock. Throws for a device without history, a count past 65,535, or more hours than
    /// the device has been up.
    public func setHistoryEntries(_ count: Int, device address: String) throws {
        guard try engine.withHistory(address, { $0.reset(count: count, now: .now) }) else {
            throw BlueZSimulatorError.unsupported(address, "cannot hold \(count) hourly entries")
        }
    }

    /// Records `count` more entries on the Mi Flora (the newest at its current time), as an hour of logging
    /// would: a client downloading again must fetch these, and only these.
    public func appendHistoryEntries(_ count: Int, device address: String) throws {
        guard try engine.withHistory(address, { $0.append(count: count, now: .now) }) else {
            throw BlueZSimulatorError.unsupported(address, "cannot hold \(count) more entries")
        }
    }

    /// The entries the Mi Flora holds now, oldest first, as 0x1a11 would answer them.
    public func historyEntries(device address: String) throws -> [SimulatedHistory.Entry] {
        try engine.withHistory(address) { $0.entries }
    }

    /// How many reads of 0x1a11 answered a stored entry since the simulator started: a client that downloads
    /// only new entries reads each once.
    public func historyEntryReads(device address: String) throws -> Int {
        try engine.withHistory(address) { $0.entryReads }
    }

    /// The Mi Flora's device time (0x1a12): seconds since it was powered.
    public func historyDeviceTime(device address: String) throws -> UInt32 {
        try engine.withHistory(address) { $0.deviceTime(at: .now) }
    }

    /// The device's clock (the LYWSD03MMC's time characteristic) in Unix seconds, with the fraction of the
    /// second that elapsed since it was set; and the time zone offset last written, in hours.
    public func deviceClock(device address: String) throws -> (unixSeconds: Double, timezoneHours: Int8) {
        let path = try engine.devicePath(address)
        let clock = engine.model.withLock { $0.devices[path]?.clock }
        guard let clock else { throw BlueZSimulatorError.unsupported(address, "no clock") }
        return (clock.now(.now), clock.timezone)
    }
}

extension SimulatorEngine {
    /// Runs `body` on the history of the device with `address`, under the model's lock.
    func withHistory<T>(_ address: String, _ body: (inout HistoryState) -> T) throws -> T {
        let path = try devicePath(address)
        let result = model.withLock { model -> T? in
            guard var history = model.devices[path]?.history else { return nil }
            defer { model.devices[path]?.history = history }
            return body(&history)
        }
        guard let result else { throw BlueZSimulatorError.unsupported(address, "no history") }
        return result
    }
}
