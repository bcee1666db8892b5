import DBus

// The control interface: io.keepalive.Simulator1 at /io/keepalive/Simulator, on a connection of its own.

extension BlueZSimulator {
    func startControl(name: String) async throws {
        let connection = try await DBusConnection(bus: engine.bus)
        do {
            try await connection.export(controlObject(), at: Self.controlPath)
            guard try await connection.requestName(name) == .primaryOwner else {
                throw BlueZSimulatorError.nameTaken(name)
            }
        } catch {
            await connection.close()
            throw error
        }
        setControl(connection)
    }

    private func controlObject() -> DBusObject {
        DBusObject(interfaces: [
            DBusInterface(
                Self.controlInterface,
                methods: [
                    DBusMethod("InjectFault", in: "ssa{sv}", inNames: ["device", "fault", "options"]) { call in
                        let (device, fault, options) = try call.arguments.decode(
                            String.self, String.self, [String: DBusValue].self)
                        try await self.inject(try Fault(name: fault, options: options), device: device)
                        return []
                    },
                    DBusMethod("ClearFault", in: "ss", inNames: ["device", "fault"]) { call in
                        let (device, fault) = try call.arguments.decode(String.self, String.self)
                        try self.clearFault(fault, device: device)
                        return []
                    },
                    DBusMethod("ClearAll") { _ in
                        self.clearAllFaults()
                        return []
                    },
                    DBusMethod(
                        "AddDevice", in: "ssa{sv}", out: "o", inNames: ["address", "name", "options"],
                        outNames: ["path"]
                    ) { call in
                        let (address, name, options) = try call.arguments.decode(
                            String.self, String.self, [String: DBusValue].self)
                        var device = [SimulatedDevice].sensors(count: 1)[0]
                        device.address = address.uppercased()
                        device.name = name.isEmpty ? nil : name
                        if let adapter = options["adapter"]?.unwrappingVariants.string { device.adapter = adapter }
                        if let cached = options["cached"]?.unwrappingVariants.boolean { device.cached = cached }
                        if let advertising = options["advertising"]?.unwrappingVariants.boolean {
                            device.advertising = advertising
                        }
                        if let rssi = options["rssi"]?.unwrappingVariants.int16 { device.rssi = rssi }
                        return [.objectPath(try await self.addDevice(device))]
                    },
                    // A passive sensor falls silent (false) or speaks again (true).
                    DBusMethod("SetAdvertising", in: "sb", inNames: ["device", "advertising"]) { call in
                        let (address, advertising) = try call.arguments.decode(String.self, Bool.self)
                        try self.setAdvertising(advertising, device: address)
                        return []
                    },
                    // `count` unconfigured passive sensors; options: rate (d, advertisements per second in all,
                    // default 1000), seed (t), adapter (s), kinds (as: bthome, bthome-encrypted, pvvx, mibeacon,
                    // ruuvi), repeats (u). Returns their addresses.
                    DBusMethod(
                        "AddAdvertisers", in: "ua{sv}", out: "as", inNames: ["count", "options"],
                        outNames: ["addresses"]
                    ) { call in
                        let (count, options) = try call.arguments.decode(UInt32.self, [String: DBusValue].self)
                        var kinds = SimulatedAdvertisement.Kind.allCases
                        if let names = options["kinds"]?.unwrappingVariants.array?.compactMap(\.string) {
                            kinds = try names.map { name in
                                guard let kind = SimulatedAdvertisement.Kind(rawValue: name) else {
                                    throw BlueZSimulatorError.invalidAdvertiser(name, "no such kind")
                                }
                                return kind
                            }
                        }
                        let addresses = try self.addAdvertisers(
                            count: Int(count), rate: options["rate"]?.unwrappingVariants.double ?? 1_000,
                            seed: options["seed"]?.unwrappingVariants.uint64 ?? 1,
                            adapter: options["adapter"]?.unwrappingVariants.string ?? "hci0", kinds: kinds,
                            repeats: Int(options["repeats"]?.unwrappingVariants.uint32 ?? 3))
                        return [.array(element: "s", addresses.map(DBusValue.string))]
                    },
                    // The Mi Flora's stored history (SimulatedHistory): replace it by `count` hourly entries, or
                    // record `count` more.
                    DBusMethod("SetHistoryEntries", in: "su", inNames: ["device", "count"]) { call in
                        let (address, count) = try call.arguments.decode(String.self, UInt32.self)
                        try self.setHistoryEntries(Int(count), device: address)
                        return []
                    },
                    DBusMethod("AppendHistoryEntries", in: "su", inNames: ["device", "count"]) { call in
                        let (address, count) = try call.arguments.decode(String.self, UInt32.self)
                        try self.appendHistoryEntries(Int(count), device: address)
                        return []
                    },
                    // How many entries the Mi Flora holds, how many entry reads it served, its device time.
                    DBusMethod(
                        "HistoryState", in: "s", out: "uuu", inNames: ["device"],
                        outNames: ["entries", "entry_reads", "device_time"]
                    ) { call in
                        let address = try call.arguments.decode(String.self)
                        let entries = try self.historyEntries(device: address).count
                        let reads = try self.historyEntryReads(device: address)
                        let time = try self.historyDeviceTime(device: address)
                        return [.uint32(UInt32(entries)), .uint32(UInt32(clamping: reads)), .uint32(time)]
                    },
                    // The device's clock in Unix seconds and its time zone offset in hours.
                    DBusMethod(
                        "DeviceClock", in: "s", out: "dn", inNames: ["device"],
                        outNames: ["unix_seconds", "timezone_hours"]
                    ) { call in
                        let address = try call.arguments.decode(String.self)
                        let clock = try self.deviceClock(device: address)
                        return [.double(clock.unixSeconds), .int16(Int16(clock.timezoneHours))]
                    },
                    DBusMethod("SetAdapterPowered", in: "sb", inNames: ["adapter", "powered"]) { call in
                        let (adapter, powered) = try call.arguments.decode(String.self, Bool.self)
                        try await self.setPowered(powered, adapter: adapter)
                        return []
                    },
                    DBusMethod("SetAdapterBlocked", in: "sb", inNames: ["adapter", "blocked"]) { call in
                        let (adapter, blocked) = try call.arguments.decode(String.self, Bool.self)
                        try await self.setBlocked(blocked, adapter: adapter)
                        return []
                    },
                    DBusMethod("Crash") { call in
                        call.afterReply { _ in await self.crash() }
                        return []
                    },
                    DBusMethod("Restart") { call in
                        call.afterReply { _ in self.restartInBackground() }
                        return []
                    },
                    // bluetoothd stopped for this many seconds (the reply comes first, then the shutdown).
                    DBusMethod("StopFor", in: "u", inNames: ["seconds"]) { call in
                        let seconds = try call.arguments.decode(UInt32.self)
                        call.afterReply { _ in self.stopInBackground(for: .seconds(Int(seconds))) }
                        return []
                    },
                ],
                properties: [
                    DBusProperty("Running", signature: "b", get: { .boolean(self.isRunning) }),
                    DBusProperty(
                        "ConnectedDevices", signature: "as",
                        get: {
                            .array(element: "s", self.connectedDevices.map(DBusValue.string))
                        }),
                    DBusProperty(
                        "CallCounts", signature: "a{su}",
                        get: {
                            .dictionary(
                                key: "s", value: "u",
                                self.callCounts.sorted { $0.key < $1.key }.map {
                                    DBusDictionaryEntry(
                                        key: .string($0.key), value: .uint32(UInt32(clamping: $0.value)))
                                })
                        }),
                    DBusProperty("AdvertisementsSent", signature: "t", get: { .uint64(self.advertisementsSent) }),
                    DBusProperty(
                        "DeviceCount", signature: "u",
                        get: {
                            .uint32(UInt32(self.engine.model.withLock { $0.devices.count }))
                        }),
                ])
        ])
    }
}
