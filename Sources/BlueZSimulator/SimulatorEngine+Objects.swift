import DBus

// The exported D-Bus objects. Getters read the model without suspending.

extension SimulatorEngine {
    static let adapterInterface = "org.bluez.Adapter1"
    static let deviceInterface = "org.bluez.Device1"
    static let batteryInterface = "org.bluez.Battery1"
    static let serviceInterface = "org.bluez.GattService1"
    static let characteristicInterface = "org.bluez.GattCharacteristic1"
    static let descriptorInterface = "org.bluez.GattDescriptor1"
    static let cccdUUID = SimulatedUUID.full("2902")

    // MARK: /org/bluez

    func rootObject() -> DBusObject {
        DBusObject(interfaces: [
            DBusInterface(
                "org.bluez.AgentManager1",
                methods: [
                    DBusMethod("RegisterAgent", in: "os", inNames: ["agent", "capability"]) { call in
                        try self.registerAgent(call)
                    },
                    DBusMethod("UnregisterAgent", in: "o", inNames: ["agent"]) { call in
                        try self.unregisterAgent(call)
                    },
                    DBusMethod("RequestDefaultAgent", in: "o", inNames: ["agent"]) { call in
                        self.count("RequestDefaultAgent")
                        let path = try call.arguments.decode(ObjectPath.self)
                        guard self.model.withLock({ $0.agents[call.sender ?? ""] }) == path else {
                            throw BlueZError.doesNotExist
                        }
                        return []
                    },
                ]),
            DBusInterface(
                "org.bluez.ProfileManager1",
                methods: [
                    DBusMethod("RegisterProfile", in: "osa{sv}", inNames: ["profile", "UUID", "options"]) { _ in
                        self.count("RegisterProfile")
                        return []
                    },
                    DBusMethod("UnregisterProfile", in: "o", inNames: ["profile"]) { _ in
                        self.count("UnregisterProfile")
                        return []
                    },
                ]),
        ])
    }

    private func registerAgent(_ call: DBusMethodCall) throws -> [DBusValue] {
        count("RegisterAgent")
        let (path, capability) = try call.arguments.decode(ObjectPath.self, String.self)
        let capabilities = ["", "DisplayOnly", "DisplayYesNo", "KeyboardOnly", "NoInputNoOutput", "KeyboardDisplay"]
        guard capabilities.contains(capability) else { throw BlueZError.invalidArguments }
        try model.withLock { model in
            guard let sender = call.sender, model.agents[sender] == nil else { throw BlueZError.alreadyExists }
            model.agents[sender] = path
        }
        return []
    }

    private func unregisterAgent(_ call: DBusMethodCall) throws -> [DBusValue] {
        count("UnregisterAgent")
        let path = try call.arguments.decode(ObjectPath.self)
        try model.withLock { model in
            guard let sender = call.sender, model.agents[sender] == path else { throw BlueZError.doesNotExist }
            model.agents[sender] = nil
        }
        return []
    }

    // MARK: Adapters

    func adapterObject(_ path: ObjectPath) -> DBusObject {
        let name = path.rawValue.split(separator: "/").last.map(String.init) ?? ""
        func get(_ body: @escaping @Sendable (AdapterState) -> DBusValue) -> @Sendable () async throws -> DBusValue {
            { [self] in
                guard let adapter = model.withLock({ $0.adapters[name] }) else { throw BlueZError.doesNotExist }
                return body(adapter)
            }
        }
        let adapter = DBusInterface(
            Self.adapterInterface,
            methods: [
                DBusMethod("StartDiscovery") { call in try await self.startDiscovery(adapter: name, call) },
                DBusMethod("StopDiscovery") { call in try await self.stopDiscovery(adapter: name, call) },
                DBusMethod("SetDiscoveryFilter", in: "a{sv}", inNames: ["properties"]) { call in
                    try self.setDiscoveryFilter(adapter: name, call)
                },
                DBusMethod("GetDiscoveryFilters", out: "as", outNames: ["filters"]) { _ in
                    self.count("GetDiscoveryFilters")
                    return [
                        .array(
                            element: "s",
                            [
                                "UUIDs", "RSSI", "Pathloss", "Transport", "DuplicateData", "Discoverable", "Pattern",
                            ].map(DBusValue.string))
                    ]
                },
                DBusMethod("RemoveDevice", in: "o", inNames: ["device"]) { call in
                    try await self.removeDevice(adapter: name, call)
                },
            ],
            properties: [
                DBusProperty("Address", signature: "s", get: get { .string($0.configuration.address) }),
                DBusProperty("AddressType", signature: "s", get: get { _ in .string("public") }),
                DBusProperty("Name", signature: "s", get: get { _ in .string("keepalive-sim") }),
                DBusProperty(
                    "Alias", signature: "s", get: get { .string($0.alias) },
                    set: { value in
                        let alias = try value.decode(String.self)
                        self.model.withLock { $0.adapters[name]?.alias = alias.isEmpty ? "keepalive-sim" : alias }
                    }),
                DBusProperty("Class", signature: "u", get: get { _ in .uint32(0x7c010c) }),
                DBusProperty(
                    "Powered", signature: "b", get: get { .boolean($0.powered) },
                    set: { value in
                        try await self.setPowered(try value.decode(Bool.self), adapter: name, announcePowered: false)
                    }),
                DBusProperty("PowerState", signature: "s", get: get { .string($0.powerState) }),
                DBusProperty(
                    "Discoverable", signature: "b", get: get { .boolean($0.discoverable) },
                    set: { value in
                        let on = try value.decode(Bool.self)
                        self.model.withLock { $0.adapters[name]?.discoverable = on }
                    }),
                DBusProperty("DiscoverableTimeout", signature: "u", get: get { _ in .uint32(180) }),
                DBusProperty(
                    "Pairable", signature: "b", get: get { .boolean($0.pairable) },
                    set: { value in
                        let on = try value.decode(Bool.self)
                        self.model.withLock { $0.adapters[name]?.pairable = on }
                    }),
                DBusProperty("PairableTimeout", signature: "u", get: get { _ in .uint32(0) }),
                DBusProperty("Discovering", signature: "b", get: get { .boolean($0.discovering) }),
                DBusProperty(
                    "UUIDs", signature: "as",
                    get: get { _ in
                        .array(
                            element: "s",
                            [
                                "00001801-0000-1000-8000-00805f9b34fb", "00001800-0000-1000-8000-00805f9b34fb",
                                "0000180a-0000-1000-8000-00805f9b34fb",
                            ].map(DBusValue.string))
                    }),
                DBusProperty("Modalias", signature: "s", get: get { _ in .string("usb:v1D6Bp0246d0542") }),
                DBusProperty(
                    "Roles", signature: "as",
                    get: get { _ in
                        .array(element: "s", [.string("central"), .string("peripheral")])
                    }),
                DBusProperty("ExperimentalFeatures", signature: "as", get: get { _ in .array(element: "s", []) }),
            ])
        let gattManager = DBusInterface(
            "org.bluez.GattManager1",
            methods: [
                DBusMethod("RegisterApplication", in: "oa{sv}", inNames: ["application", "options"]) { _ in
                    throw BlueZError.notSupported
                },
                DBusMethod("UnregisterApplication", in: "o", inNames: ["application"]) { _ in
                    throw BlueZError.doesNotExist
                },
            ])
        let advertising = DBusInterface(
            "org.bluez.LEAdvertisingManager1",
            methods: [
                DBusMethod("RegisterAdvertisement", in: "oa{sv}", inNames: ["advertisement", "options"]) { _ in
                    throw BlueZError.notSupported
                },
                DBusMethod("UnregisterAdvertisement", in: "o", inNames: ["service"]) { _ in
                    throw BlueZError.doesNotExist
                },
            ],
            properties: [
                DBusProperty("ActiveInstances", signature: "y", get: { .byte(0) }),
                DBusProperty("SupportedInstances", signature: "y", get: { .byte(5) }),
                DBusProperty(
                    "SupportedIncludes", signature: "as",
                    get: {
                        .array(element: "s", ["tx-power", "appearance", "local-name"].map(DBusValue.string))
                    }),
                DBusProperty(
                    "SupportedSecondaryChannels", signature: "as",
                    get: {
                        .array(element: "s", ["1M", "2M", "Coded"].map(DBusValue.string))
                    }),
            ])
        return DBusObject(interfaces: [adapter, gattManager, advertising])
    }

    // MARK: Devices

    func deviceObject(_ path: ObjectPath, battery: Bool) -> DBusObject {
        func get(_ body: @escaping @Sendable (DeviceState) -> DBusValue) -> @Sendable () async throws -> DBusValue {
            { [self] in
                guard let device = model.withLock({ $0.devices[path] }) else { throw BlueZError.unknownObject(path) }
                return body(device)
            }
        }
        func exists(_ body: @escaping @Sendable (DeviceState) -> Bool) -> @Sendable () -> Bool {
            { [self] in model.withLock { $0.devices[path].map(body) ?? false } }
        }
        func set(_ body: @escaping @Sendable (inout DeviceState, DBusValue) throws -> Void)
            -> @Sendable (DBusValue) async throws -> Void
        {
            { [self] value in
                try model.withLock { model in
                    guard var device = model.devices[path] else { throw BlueZError.unknownObject(path) }
                    try body(&device, value)
                    model.devices[path] = device
                }
            }
        }
        var interfaces = [
            DBusInterface(
                Self.deviceInterface,
                methods: [
                    DBusMethod("Connect") { call in try await self.connect(call) },
                    DBusMethod("Disconnect") { call in try await self.disconnect(call) },
                    DBusMethod("Pair") { call in
                        self.count("Pair")
                        try self.model.withLock { model in
                            guard model.devices[call.path]?.connected == true else { throw BlueZError.notConnected }
                            model.devices[call.path]?.paired = true
                        }
                        await self.emitChanged(call.path, Self.deviceInterface, ["Paired": .boolean(true)])
                        return []
                    },
                    DBusMethod("CancelPairing") { _ in throw BlueZError.doesNotExist },
                    DBusMethod("ConnectProfile", in: "s", inNames: ["UUID"]) { _ in throw BlueZError.notSupported },
                    DBusMethod("DisconnectProfile", in: "s", inNames: ["UUID"]) { _ in throw BlueZError.notSupported },
                ],
                properties: [
                    DBusProperty("Address", signature: "s", get: get { .string($0.configuration.address) }),
                    DBusProperty(
                        "AddressType", signature: "s", get: get { .string($0.configuration.addressType.rawValue) }),
                    DBusProperty(
                        "Name", signature: "s", get: get { .string($0.configuration.name ?? "") },
                        exists: exists { $0.configuration.name != nil }),
                    DBusProperty(
                        "Alias", signature: "s",
                        get: get { device in
                            .string(
                                device.configuration.name
                                    ?? device.configuration.address.split(separator: ":").joined(separator: "-"))
                        }),
                    DBusProperty(
                        "Appearance", signature: "q", get: get { .uint16($0.configuration.appearance ?? 0) },
                        exists: exists { $0.configuration.appearance != nil }),
                    DBusProperty("Paired", signature: "b", get: get { .boolean($0.paired) }),
                    DBusProperty("Bonded", signature: "b", get: get { .boolean($0.paired) }),
                    DBusProperty(
                        "Trusted", signature: "b", get: get { .boolean($0.trusted) },
                        set: set { device, value in device.trusted = try value.decode(Bool.self) }),
                    DBusProperty(
                        "Blocked", signature: "b", get: get { .boolean($0.blocked) },
                        set: set { device, value in device.blocked = try value.decode(Bool.self) }),
                    DBusProperty("LegacyPairing", signature: "b", get: get { _ in .boolean(false) }),
                    DBusProperty(
                        "RSSI", signature: "n", get: get { .int16($0.rssi ?? 0) }, exists: exists { $0.rssi != nil }),
                    DBusProperty(
                        "TxPower", signature: "n", get: get { .int16($0.configuration.txPower ?? 0) },
                        exists: exists { $0.rssi != nil && $0.configuration.txPower != nil }),
                    DBusProperty("Connected", signature: "b", get: get { .boolean($0.connected) }),
                    DBusProperty(
                        "UUIDs", signature: "as",
                        get: get { device in
                            .array(element: "s", device.services.map(\.uuid).sorted().map(DBusValue.string))
                        }),
                    DBusProperty("Adapter", signature: "o", get: get { .objectPath($0.adapterPath) }),
                    DBusProperty(
                        "ManufacturerData", signature: "a{qv}",
                        get: get { device in
                            .dictionary(
                                key: "q", value: "v",
                                device.manufacturerData.sorted { $0.key < $1.key }.map {
                                    DBusDictionaryEntry(key: .uint16($0.key), value: .variant(.bytes($0.value)))
                                })
                        },
                        exists: exists { !$0.manufacturerData.isEmpty }),
                    DBusProperty(
                        "ServiceData", signature: "a{sv}",
                        get: get { device in
                            .dictionary(
                                key: "s", value: "v",
                                device.serviceData.sorted { $0.key < $1.key }.map {
                                    DBusDictionaryEntry(key: .string($0.key), value: .variant(.bytes($0.value)))
                                })
                        },
                        exists: exists { !$0.serviceData.isEmpty }),
                    DBusProperty("ServicesResolved", signature: "b", get: get { .boolean($0.servicesResolved) }),
                    DBusProperty("AdvertisingFlags", signature: "ay", get: get { _ in .bytes([0x06]) }),
                    DBusProperty("WakeAllowed", signature: "b", get: get { _ in .boolean(false) }),
                ])
        ]
        if battery {
            interfaces.append(
                DBusInterface(
                    Self.batteryInterface,
                    properties: [
                        DBusProperty("Percentage", signature: "y", get: { [self] in .byte(batteryPercentage(path)) }),
                        DBusProperty("Source", signature: "s", get: { .string("GATT Battery Service") }),
                    ]))
        }
        return DBusObject(interfaces: interfaces)
    }

    /// The level the battery plugin read from 0x2A19.
    func batteryPercentage(_ devicePath: ObjectPath) -> UInt8 {
        model.withLock { model in
            guard let service = model.devices[devicePath]?.batteryService,
                let level = service.characteristics.compactMap({ model.characteristics[$0] })
                    .first(where: { $0.configuration.uuid == SimulatedUUID.full("2A19") })
            else { return 0 }
            let link = model.devices[devicePath]?.link ?? 0
            return (level.written(onLink: link) ?? level.configuration.value.value(level.readSequence)).first ?? 0
        }
    }

    // MARK: GATT

    /// The GATT objects of a device, parents first, as bluetoothd exports them after discovering services.
    func gattObjects(_ devicePath: ObjectPath) -> [(ObjectPath, DBusObject)] {
        let (services, characteristics) = model.withLock { model in
            let services = model.devices[devicePath]?.services.filter { !$0.claimed } ?? []
            let characteristics = services.flatMap(\.characteristics).compactMap { model.characteristics[$0] }
            return (services, characteristics)
        }
        var objects: [(ObjectPath, DBusObject)] = []
        for service in services {
            objects.append(
                (
                    service.path,
                    DBusObject(interfaces: [
                        DBusInterface(
                            Self.serviceInterface,
                            properties: [
                                DBusProperty("UUID", signature: "s", get: { .string(service.uuid) }),
                                DBusProperty("Device", signature: "o", get: { .objectPath(devicePath) }),
                                DBusProperty("Primary", signature: "b", get: { .boolean(service.primary) }),
                                DBusProperty("Includes", signature: "ao", get: { .array(element: "o", []) }),
                                DBusProperty("Handle", signature: "q", get: { .uint16(service.handle) }),
                            ])
                    ])
                ))
            for characteristic in characteristics where characteristic.servicePath == service.path {
                objects.append((characteristic.path, characteristicObject(characteristic)))
                if let descriptor = characteristic.descriptorPath {
                    objects.append((descriptor, descriptorObject(descriptor, of: characteristic)))
                }
                for descriptor in characteristic.descriptors {
                    objects.append((descriptor.path, configuredDescriptorObject(descriptor, of: characteristic.path)))
                }
            }
        }
        return objects
    }

    private func characteristicObject(_ characteristic: CharacteristicState) -> DBusObject {
        let path = characteristic.path
        let canNotify = characteristic.configuration.canNotify
        func get(_ body: @escaping @Sendable (CharacteristicState) -> DBusValue)
            -> @Sendable () async throws -> DBusValue
        {
            { [self] in
                guard let state = model.withLock({ $0.characteristics[path] }) else {
                    throw BlueZError.unknownObject(path)
                }
                return body(state)
            }
        }
        return DBusObject(interfaces: [
            DBusInterface(
                Self.characteristicInterface,
                methods: [
                    DBusMethod("ReadValue", in: "a{sv}", out: "ay", inNames: ["options"], outNames: ["value"]) { call in
                        try await self.readValue(call)
                    },
                    DBusMethod("WriteValue", in: "aya{sv}", inNames: ["value", "options"]) { call in
                        try await self.writeValue(call)
                    },
                    DBusMethod("StartNotify") { call in try await self.startNotify(call) },
                    DBusMethod("StopNotify") { call in try await self.stopNotify(call) },
                ],
                properties: [
                    DBusProperty("UUID", signature: "s", get: { .string(characteristic.configuration.uuid) }),
                    DBusProperty("Service", signature: "o", get: { .objectPath(characteristic.servicePath) }),
                    DBusProperty("Value", signature: "ay", get: get { .bytes($0.value) }),
                    DBusProperty(
                        "Notifying", signature: "b", get: get { .boolean($0.notifying) }, exists: { canNotify }),
                    DBusProperty(
                        "Flags", signature: "as",
                        get: {
                            .array(
                                element: "s",
                                Self.inBluetoothdOrder(characteristic.configuration.flags).map(DBusValue.string))
                        }),
                    DBusProperty("MTU", signature: "q", get: { .uint16(247) }),
                    DBusProperty("Handle", signature: "q", get: { .uint16(characteristic.handle) }),
                ])
        ])
    }

    /// bluetoothd lists a characteristic's flags in the order of their property bits (its gatt-client's table),
    /// whatever order a configuration names them in; names it does not know keep their place after those.
    static func inBluetoothdOrder(_ flags: [String]) -> [String] {
        let order = [
            "broadcast", "read", "write-without-response", "write", "notify", "indicate", "authenticated-signed-writes",
            "extended-properties", "reliable-write", "writable-auxiliaries",
        ]
        return flags.enumerated().sorted { lhs, rhs in
            (order.firstIndex(of: lhs.element) ?? order.count, lhs.offset) < (
                order.firstIndex(of: rhs.element) ?? order.count, rhs.offset
            )
        }.map(\.element)
    }

    private func descriptorObject(_ path: ObjectPath, of characteristic: CharacteristicState) -> DBusObject {
        let handle = UInt16(path.rawValue.suffix(4), radix: 16) ?? 0
        return DBusObject(interfaces: [
            DBusInterface(
                Self.descriptorInterface,
                methods: [
                    DBusMethod("ReadValue", in: "a{sv}", out: "ay", inNames: ["options"], outNames: ["value"]) { call in
                        try await self.readDescriptor(call, characteristic: characteristic.path)
                    },
                    DBusMethod("WriteValue", in: "aya{sv}", inNames: ["value", "options"]) { _ in
                        // bluetoothd owns the CCCD: clients use StartNotify.
                        self.count("WriteValue")
                        throw BlueZError.writeNotPermitted
                    },
                ],
                properties: [
                    DBusProperty("UUID", signature: "s", get: { .string(Self.cccdUUID) }),
                    DBusProperty("Characteristic", signature: "o", get: { .objectPath(characteristic.path) }),
                    DBusProperty("Value", signature: "ay", get: { [self] in .bytes(cccdValue(characteristic.path)) }),
                    DBusProperty(
                        "Flags", signature: "as", get: { .array(element: "s", [.string("read"), .string("write")]) }),
                    DBusProperty("Handle", signature: "q", get: { .uint16(handle) }),
                ])
        ])
    }

    func cccdValue(_ characteristicPath: ObjectPath) -> [UInt8] {
        let notifying = model.withLock { model in
            guard let characteristic = model.characteristics[characteristicPath],
                let device = model.devices[characteristic.devicePath]
            else { return false }
            return characteristic.notifying && device.connected
        }
        return notifying ? [0x01, 0x00] : [0x00, 0x00]
    }
}
