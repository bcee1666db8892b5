import DBus

// GattDescriptor1 objects of configured descriptors (0x2904, 0x2901…): the CCCD lives in
// SimulatorEngine+Objects.swift because bluetoothd owns it; these are the peripheral's own bytes.

extension SimulatorEngine {
    func configuredDescriptorObject(_ descriptor: DescriptorLayout, of characteristicPath: ObjectPath) -> DBusObject {
        let path = descriptor.path
        let configuration = descriptor.configuration
        return DBusObject(interfaces: [
            DBusInterface(
                Self.descriptorInterface,
                methods: [
                    DBusMethod("ReadValue", in: "a{sv}", out: "ay", inNames: ["options"], outNames: ["value"]) { call in
                        try await self.readConfiguredDescriptor(call, descriptor, of: characteristicPath)
                    },
                    DBusMethod("WriteValue", in: "aya{sv}", inNames: ["value", "options"]) { call in
                        try await self.writeConfiguredDescriptor(call, descriptor, of: characteristicPath)
                    },
                ],
                properties: [
                    DBusProperty("UUID", signature: "s", get: { .string(configuration.uuid) }),
                    DBusProperty("Characteristic", signature: "o", get: { .objectPath(characteristicPath) }),
                    // Like a characteristic's, the Value property is bluetoothd's cache: empty until the first read.
                    DBusProperty(
                        "Value", signature: "ay",
                        get: { [self] in
                            .bytes(
                                model.withLock { $0.characteristics[characteristicPath]?.descriptorValues[path] } ?? [])
                        }),
                    DBusProperty(
                        "Flags", signature: "as",
                        get: {
                            .array(element: "s", configuration.flags.map(DBusValue.string))
                        }),
                    DBusProperty("Handle", signature: "q", get: { .uint16(descriptor.handle) }),
                ])
        ])
    }

    /// ReadValue on a configured descriptor: one ATT read (read latency), then PropertiesChanged Value before the
    /// reply, as bluetoothd does. The "offset" option reads from that byte on.
    private func readConfiguredDescriptor(
        _ call: DBusMethodCall, _ descriptor: DescriptorLayout, of characteristicPath: ObjectPath
    ) async throws -> [DBusValue] {
        count("ReadValue")
        let options = try call.arguments.decode([String: DBusValue].self)
        let offset = try Self.option(options, "offset", as: UInt16.self) ?? 0
        _ = try Self.option(options, "device", as: ObjectPath.self)
        let link = try linkForDescriptor(descriptor, of: characteristicPath, needs: "read")
        try await Task.sleep(for: scaled(configuration.latencies.read))
        let value = try model.withLock { model -> [UInt8] in
            guard var characteristic = model.characteristics[characteristicPath],
                model.devices[characteristic.devicePath]?.link == link
            else { throw BlueZError.notConnected }
            let full = characteristic.descriptorWrites[descriptor.path] ?? descriptor.configuration.value
            guard Int(offset) <= full.count else { throw BlueZError.attError(0x07) }
            let value = Array(full[Int(offset)...])
            characteristic.descriptorValues[descriptor.path] = value
            model.characteristics[characteristicPath] = characteristic
            return value
        }
        await emitChanged(descriptor.path, Self.descriptorInterface, ["Value": .bytes(value)])
        return [.bytes(value)]
    }

    /// WriteValue on a configured descriptor: allowed when its flags say `write`; the bytes replace what reads
    /// answer, for as long as the simulator runs (a descriptor is no mode switch).
    private func writeConfiguredDescriptor(
        _ call: DBusMethodCall, _ descriptor: DescriptorLayout, of characteristicPath: ObjectPath
    ) async throws -> [DBusValue] {
        count("WriteValue")
        let (bytes, options) = try call.arguments.decode([UInt8].self, [String: DBusValue].self)
        let offset = try Self.option(options, "offset", as: UInt16.self) ?? 0
        _ = try Self.option(options, "device", as: ObjectPath.self)
        let link = try linkForDescriptor(descriptor, of: characteristicPath, needs: "write")
        try await Task.sleep(for: scaled(configuration.latencies.write))
        try model.withLock { model in
            guard var characteristic = model.characteristics[characteristicPath],
                model.devices[characteristic.devicePath]?.link == link
            else { throw BlueZError.notConnected }
            var stored = characteristic.descriptorWrites[descriptor.path] ?? descriptor.configuration.value
            guard Int(offset) <= stored.count else { throw BlueZError.attError(0x07) }
            stored.replaceSubrange(Int(offset)..<min(stored.count, Int(offset) + bytes.count), with: bytes)
            characteristic.descriptorWrites[descriptor.path] = stored
            model.characteristics[characteristicPath] = characteristic
        }
        return []
    }

    /// The checks bluetoothd makes before an ATT request on a descriptor, in its order; returns the link the
    /// request goes out on.
    private func linkForDescriptor(
        _ descriptor: DescriptorLayout, of characteristicPath: ObjectPath, needs flag: String
    )
        throws -> Int
    {
        try model.withLock { model in
            guard let characteristic = model.characteristics[characteristicPath],
                let device = model.devices[characteristic.devicePath], device.gattExported
            else { throw BlueZError.unknownObject(descriptor.path) }
            guard descriptor.configuration.flags.contains(flag) else {
                throw flag == "read" ? BlueZError.readNotPermitted : BlueZError.writeNotPermitted
            }
            guard device.connected else { throw BlueZError.notConnected }
            if device.faults.inProgress { throw BlueZError.inProgress }
            return device.link
        }
    }
}
