import DBus
import KeepAlive

/// Where the cache files an interface of an object: devices' `Device1` compactly (`devices`), GATT objects in
/// bluetoothd's form compactly (`gatt`), the rest whole (`objects`, with the two indexes over the GATT objects
/// kept there). Every reader and writer of the tree
/// goes through these, so no caller knows which store holds an object.
extension BlueZObjectCache.State {
    /// The GATT object at `path` kept compactly (with `interface`, when given), and its device.
    func gattObject(at path: ObjectPath, _ interface: String? = nil) -> (device: ObjectPath, object: GattObject)? {
        guard let (device, key) = GattObject.Key.locate(path),
            let object = gatt[device]?.first(where: { $0.key == key })
        else {
            return nil
        }
        if let interface, object.kind.interface != interface { return nil }
        return (device, object)
    }

    /// Every adapter, in path order.
    func adapters() -> [Adapter1] {
        objects.compactMap { path, interfaces in
            interfaces[BlueZ.adapterInterface].map { Adapter1(path: path, properties: $0) }
        }
        .sorted { $0.path < $1.path }
    }

    func properties(_ path: ObjectPath, _ interface: String) -> BlueZProperties? {
        if interface == BlueZ.deviceInterface { return devices[path]?.properties(at: path) }
        if let properties = objects[path]?[interface] { return properties }
        guard GattObject.Kind(interface: interface) != nil, let (device, object) = gattObject(at: path, interface)
        else { return nil }
        return object.properties(below: device)
    }

    func hasObject(_ path: ObjectPath) -> Bool {
        objects[path] != nil || devices[path] != nil || gattObject(at: path) != nil
    }

    /// Files `interface` of `path` with `properties` as received (an InterfacesAdded, or the whole tree), replacing
    /// what was there.
    mutating func store(_ path: ObjectPath, _ interface: String, _ properties: [String: DBusValue]) {
        if interface == BlueZ.deviceInterface {
            devices[path] = DeviceObject(at: path, properties)
            return
        }
        // Only the interface the path's form names (a characteristic's path holds GattCharacteristic1): another
        // one there is kept whole, beside the compact object, which it must not replace.
        if let (device, key) = GattObject.Key.locate(path), GattObject.Kind(interface: interface) == key.kind {
            if let object = GattObject(key: key, device: device, interface: interface, properties: properties) {
                removeWhole(path, interface)
                Self.insert(object, into: &gatt[device, default: []])
                return
            }
            removeCompact(key, of: device)
        }
        storeWhole(path, interface, BlueZProperties(properties))
    }

    /// Forgets `interface` of `path` (an InterfacesRemoved).
    mutating func remove(_ path: ObjectPath, _ interface: String) {
        if interface == BlueZ.deviceInterface {
            devices[path] = nil
            return
        }
        if let (device, key) = GattObject.Key.locate(path), GattObject.Kind(interface: interface) == key.kind {
            removeCompact(key, of: device)
        }
        removeWhole(path, interface)
    }

    /// Forgets an operation's invalidator, and the device's entry with its last one (each of 10,000 devices
    /// polled once kept an empty dictionary and its path here: 2.3 MiB).
    mutating func removeInvalidator(_ id: UInt64, of device: ObjectPath) {
        invalidators[device]?[id] = nil
        if invalidators[device]?.isEmpty == true { invalidators[device] = nil }
    }

    /// Forgets every GATT object below `device` (the device object itself is gone).
    mutating func removeGATT(of device: ObjectPath) {
        gatt[device] = nil
        characteristicIndex[device] = nil
        if !descriptorIndex.isEmpty { descriptorIndex = descriptorIndex.filter { !$0.key.isDescendant(of: device) } }
    }

    /// Applies a PropertiesChanged (or values learned by asking) to a known object; false when `interface` of
    /// `path` is not in the tree (a change racing an InterfacesRemoved must not bring it back).
    mutating func change(
        _ path: ObjectPath, _ interface: String, changed: [PropertiesChange.Property], invalidated: [String]
    ) -> Bool {
        if interface == BlueZ.deviceInterface {
            // One lookup, then the device is changed in place (a lookup per property was 13 hashes a poll).
            guard let index = devices.index(forKey: path) else { return false }
            for property in changed { devices.values[index].set(property.name, to: property.value, at: path) }
            for name in invalidated { devices.values[index].set(name, to: nil, at: path) }
            return true
        }
        if objects[path]?[interface] != nil {
            for property in changed { objects[path]![interface]!.set(property.name, to: property.value) }
            for name in invalidated { objects[path]![interface]!.set(name, to: nil) }
            return true
        }
        guard GattObject.Kind(interface: interface) != nil, let (device, key) = GattObject.Key.locate(path),
            let index = gatt[device]?.firstIndex(where: { $0.key == key }),
            gatt[device]![index].kind.interface == interface
        else { return false }
        var object = gatt[device]![index]
        var fits = true
        for property in changed where fits { fits = object.set(property.name, to: property.value.unwrappingVariants) }
        for name in invalidated where fits { fits = object.set(name, to: nil) }
        if fits {
            gatt[device]![index] = object
            return true
        }
        // A change this form cannot keep exactly: the object is kept whole from now on.
        var properties = gatt[device]![index].properties(below: device)
        removeCompact(key, of: device)
        for property in changed { properties.set(property.name, to: property.value) }
        for name in invalidated { properties.set(name, to: nil) }
        storeWhole(path, interface, properties)
        return true
    }

    private mutating func storeWhole(_ path: ObjectPath, _ interface: String, _ properties: BlueZProperties) {
        objects[path, default: [:]][interface] = properties
        if interface == BlueZ.gattCharacteristicInterface, let uuid = properties.uuid("UUID"),
            let device = BlueZ.deviceOwning(path)
        {
            characteristicIndex[device, default: [:]][uuid] = path
        } else if interface == BlueZ.gattDescriptorInterface, let characteristic = path.parent {
            descriptorIndex[characteristic, default: []].insert(path)
        }
    }

    private mutating func removeWhole(_ path: ObjectPath, _ interface: String) {
        guard let properties = objects[path]?[interface] else { return }
        if interface == BlueZ.gattCharacteristicInterface, let uuid = properties.uuid("UUID"),
            let device = BlueZ.deviceOwning(path),
            characteristicIndex[device]?[uuid] == path
        {
            characteristicIndex[device]?[uuid] = nil
        } else if interface == BlueZ.gattDescriptorInterface, let characteristic = path.parent {
            descriptorIndex[characteristic]?.remove(path)
            if descriptorIndex[characteristic]?.isEmpty == true { descriptorIndex[characteristic] = nil }
        }
        objects[path]?[interface] = nil
        if objects[path]?.isEmpty ?? false { objects[path] = nil }
    }

    private mutating func removeCompact(_ key: GattObject.Key, of device: ObjectPath) {
        guard let index = gatt[device]?.firstIndex(where: { $0.key == key }) else { return }
        gatt[device]!.remove(at: index)
        if gatt[device]!.isEmpty { gatt[device] = nil }
    }

    /// Inserts `object` in path order (bluetoothd's handles are 4 hex digits, so path order is handle order),
    /// replacing one at the same path.
    private static func insert(_ object: GattObject, into list: inout [GattObject]) {
        guard let index = list.firstIndex(where: { $0.key >= object.key }) else { return list.append(object) }
        if list[index].key == object.key {
            list[index] = object
        } else {
            list.insert(object, at: index)
        }
    }
}
