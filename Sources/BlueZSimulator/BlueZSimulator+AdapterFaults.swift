extension BlueZSimulator {
    /// Wedges `adapter`'s controller, as a real one sometimes does after weeks: every Connect through it aborts
    /// (`le-connection-abort-by-local`, after the abort delay) until the adapter is powered off, by anyone.
    /// Discovery and links already up are unaffected.
    public func wedge(adapter: String = "hci0") throws {
        try engine.model.withLock { model in
            guard model.adapters[adapter] != nil else { throw BlueZSimulatorError.unknownAdapter(adapter) }
            model.adapters[adapter]?.wedged = true
        }
    }

    /// Whether `adapter` is wedged (cleared by powering it off).
    public func isWedged(adapter: String = "hci0") -> Bool {
        engine.model.withLock { $0.adapters[adapter]?.wedged ?? false }
    }

    /// How often `adapter` was powered on again after being off (by a client's `Powered`, `setPowered`, or the
    /// control interface).
    public func powerOns(adapter: String = "hci0") -> Int {
        engine.model.withLock { $0.adapters[adapter]?.powerCycles ?? 0 }
    }

    /// Whether `adapter` is powered now.
    public func isPowered(adapter: String = "hci0") -> Bool {
        engine.model.withLock { $0.adapters[adapter]?.powered ?? false }
    }
}
