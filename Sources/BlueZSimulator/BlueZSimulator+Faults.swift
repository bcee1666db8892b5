public import DBus

extension BlueZSimulator {
    /// A failure to inject into one device, at run time (Swift API or the control interface).
    ///
    /// ```swift
    /// try await simulator.inject(.connectAbort(count: 2), device: "C0:FF:EE:00:00:01")
    /// try await simulator.inject(.attError(0x0e), device: "C0:FF:EE:00:00:02")
    /// ```
    public enum Fault: Sendable, Hashable {
        /// The next `count` connects fail with `le-connection-abort-by-local` after the abort delay.
        case connectAbort(count: Int)
        /// Connect, ReadValue and WriteValue answer `org.bluez.Error.InProgress`.
        case inProgress
        /// Reads hang until the ATT timeout; then the read fails ("Not connected") and the link drops.
        case readHang
        /// Reads fail with `Operation failed with ATT error: 0xNN`.
        case attError(UInt8)
        /// The device stops advertising: connects time out with `le-connection-abort-by-local`, discovery no
        /// longer finds it, an existing link stays.
        case absent
        /// The device is removed (InterfacesRemoved); calls in flight on it fail with UnknownObject.
        case vanish
        /// The peripheral is powered off: an existing link drops ~100 ms later (its controller ends it;
        /// Connected=false, reads in flight fail "Not connected", notifications stop), then it is `absent`
        /// until cleared.
        case powerOff
        /// A zombie link: notifications stop while the link stays up (Connected=true), until it is dropped; a
        /// new link notifies again.
        case silentNotifications

        /// The name used on the control interface: `connect-abort`, `in-progress`, `read-hang`, `att-error`,
        /// `absent`, `vanish`, `power-off`, `silent-notifications`.
        public var name: String {
            switch self {
            case .connectAbort: "connect-abort"
            case .inProgress: "in-progress"
            case .readHang: "read-hang"
            case .attError: "att-error"
            case .absent: "absent"
            case .vanish: "vanish"
            case .powerOff: "power-off"
            case .silentNotifications: "silent-notifications"
            }
        }

        /// Parses a control-interface fault: options `count` (u or i) for connect-abort, `code` (y or u) for
        /// att-error.
        public init(name: String, options: [String: DBusValue] = [:]) throws {
            func integer(_ key: String, default value: Int) -> Int {
                switch options[key]?.unwrappingVariants {
                case .byte(let v)?: Int(v)
                case .uint32(let v)?: Int(v)
                case .int32(let v)?: Int(v)
                case .uint16(let v)?: Int(v)
                case .int64(let v)?: Int(v)
                case .uint64(let v)?: Int(v)
                default: value
                }
            }
            switch name {
            case "connect-abort": self = .connectAbort(count: integer("count", default: 1))
            case "in-progress": self = .inProgress
            case "read-hang": self = .readHang
            case "att-error": self = .attError(UInt8(clamping: integer("code", default: 0x0e)))
            case "absent": self = .absent
            case "vanish": self = .vanish
            case "power-off": self = .powerOff
            case "silent-notifications": self = .silentNotifications
            default: throw BlueZSimulatorError.unknownFault(name)
            }
        }
    }
}

extension SimulatorEngine {
    func inject(_ fault: BlueZSimulator.Fault, device address: String) async throws {
        let path = try devicePath(address)
        switch fault {
        case .vanish:
            model.withLock { $0.devices[path]?.advertising = false }
            await removeFromBus(path, error: BlueZError.unknownObject(path), announceLinkDown: false)
        case .powerOff:
            model.withLock { $0.devices[path]?.advertising = false }
            schedule(after: configuration.latencies.powerOffLinkLoss) { [self] in await dropLink(path) }
        default:
            model.withLock { model in
                guard var device = model.devices[path] else { return }
                switch fault {
                case .connectAbort(let count): device.faults.connectAborts += max(0, count)
                case .inProgress: device.faults.inProgress = true
                case .readHang: device.faults.readHang = true
                case .attError(let code): device.faults.attError = code
                case .absent: device.advertising = false
                case .silentNotifications: device.faults.silentNotifications = true
                case .vanish, .powerOff: break
                }
                model.devices[path] = device
            }
        }
    }

    /// Clears one fault by name; `absent`, `vanish` and `power-off` make the device advertise again (discovery
    /// finds it).
    func clearFault(_ name: String, device address: String) throws {
        let path = try devicePath(address)
        try model.withLock { model in
            guard var device = model.devices[path] else { return }
            switch name {
            case "connect-abort": device.faults.connectAborts = 0
            case "in-progress": device.faults.inProgress = false
            case "read-hang": device.faults.readHang = false
            case "att-error": device.faults.attError = nil
            case "silent-notifications": device.faults.silentNotifications = false
            case "absent", "vanish", "power-off": device.advertising = true
            default: throw BlueZSimulatorError.unknownFault(name)
            }
            model.devices[path] = device
        }
    }

    func clearAllFaults() {
        model.withLock { model in
            for path in model.devices.keys {
                model.devices[path]?.faults = FaultState()
                if let configured = model.devices[path]?.configuration.advertising {
                    model.devices[path]?.advertising = configured
                }
            }
        }
    }
}
