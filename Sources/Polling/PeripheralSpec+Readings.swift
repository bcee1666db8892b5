import KeepAlive
public import Readings

extension PeripheralSpec {
    /// The characteristics whose readings their 0x2904 descriptor decides: read or notified, with no configured
    /// layout and no SIG table entry.
    public var presentationCandidates: [BluetoothUUID] {
        var seen = Set<BluetoothUUID>()
        return (reads + notifications.map(\.characteristic)).filter { characteristic in
            guard seen.insert(characteristic).inserted, decoding[characteristic]?.layout == nil else { return false }
            return characteristic.assignedNumber.flatMap(SIGCharacteristics.entry) == nil
        }
    }

    /// How `characteristic`'s values are decoded, given its 0x2904 descriptor if known.
    public func decoding(
        of characteristic: BluetoothUUID,
        presentation: PresentationFormat?
    ) -> CharacteristicDecoding {
        let configured = decoding[characteristic]
        return ReadingsDecoder.decoding(
            for: characteristic.assignedNumber,
            presentation: presentation,
            layout: configured?.layout,
            fallbackName: configured?.name ?? characteristic.shortDescription
        )
    }

    /// One poll's readings: each read characteristic's value and each notified characteristic's last
    /// notification, decoded, in the order the spec lists them (reads, then notifications); a characteristic
    /// both read and notified gives its readings once, from its newest bytes (the last notification).
    public func readings(
        values: [PollRecord.Value],
        notifications: [PollRecord.Notification],
        presentations: [BluetoothUUID: PresentationFormat] = [:]
    ) -> [Reading] {
        guard !values.isEmpty || !notifications.isEmpty else { return [] }
        var newest: [BluetoothUUID: [UInt8]] = [:]
        for value in values { newest[value.characteristic] = value.bytes }
        for notification in notifications { newest[notification.characteristic] = notification.bytes }
        var readings: [Reading] = []
        var seen = Set<BluetoothUUID>()
        for characteristic in reads + notifications.map(\.characteristic) where seen.insert(characteristic).inserted {
            guard let bytes = newest[characteristic] else { continue }
            readings += ReadingsDecoder.decode(
                bytes, as: decoding(of: characteristic, presentation: presentations[characteristic]))
        }
        return readings
    }
}
