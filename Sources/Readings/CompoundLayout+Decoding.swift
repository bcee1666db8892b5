extension CompoundLayout {
    /// Decodes a payload. Never throws.
    ///
    /// - A missing flags byte fails every always-present field with ``ReadingError/Code/payloadTooShort``.
    /// - Reserved flag bits set: a later specification may have inserted fields we do not know,
    ///   so only fields before the first optional one (whose offsets cannot move) are decoded;
    ///   present optional fields fail with ``ReadingError/Code/reservedFlag``, and a `flags`
    ///   reading carries the raw flags with the same error so the condition is never silent.
    /// - A field past the end fails with ``ReadingError/Code/payloadTooShort``; so do the fields after it.
    /// - Bytes after the last field are ignored (GSS lets later versions append fields).
    func readings(from bytes: [UInt8]) -> [Reading] {
        let reader = ByteReader(bytes)
        var readings: [Reading] = []
        readings.reserveCapacity(fields.count &+ 1)
        var flags: UInt8 = 0
        var offset = 0
        if hasFlags {
            guard let first = bytes.first else {
                let error = ReadingError.payloadTooShort(needs: 1, at: 0, has: 0)
                for field in fields where field.presentWhen == 0 {
                    readings.append(.failed(field.name, unit: field.unit(flags: 0), error))
                }
                return readings
            }
            flags = first
            offset = 1
        }
        let reserved = flags & reservedFlags
        var ambiguous = false
        if reserved != 0 {
            readings.append(
                Reading(
                    name: "flags",
                    value: .unsigned(UInt64(flags)),
                    error: Self.reservedFlagError(flags: flags, reserved: reserved)
                ))
        }
        for field in fields {
            if field.presentWhen != 0 {
                guard flags & field.presentWhen != 0 else { continue }
                if reserved != 0 { ambiguous = true }
            }
            if ambiguous {
                readings.append(
                    .failed(
                        field.name,
                        unit: field.unit(flags: flags),
                        Self.reservedFlagError(flags: flags, reserved: reserved)
                    ))
                continue
            }
            let (reading, byteCount) = field.decode(reader, at: offset, flags: flags)
            readings.append(reading)
            offset = offset &+ byteCount
        }
        return readings
    }

    private static func reservedFlagError(flags: UInt8, reserved: UInt8) -> ReadingError {
        ReadingError(
            .reservedFlag,
            "flags \(HexText.number(UInt64(flags), digits: 2)) set reserved bits "
                + """
                    \(HexText.number(UInt64(reserved), digits: 2)); the fields after the mandatory ones cannot be \
                    located
                    """
        )
    }
}

extension CompoundLayout.Field {
    /// Decodes the field at `offset`; returns the reading and the bytes the field occupies
    /// (as declared, so that a short field still moves later fields past the end).
    func decode(_ reader: ByteReader, at offset: Int, flags: UInt8) -> (Reading, Int) {
        switch content {
        case .number(let number):
            return (number.reading(named: name, from: reader, at: offset), number.format.byteCount ?? 0)
        case .numberByFlag(let flag, let clear, let set):
            let number = flags & flag == 0 ? clear : set
            return (number.reading(named: name, from: reader, at: offset), number.format.byteCount ?? 0)
        case .repeatedNumbers(let number):
            // Takes the rest of the payload: any later field would be past the end.
            return (repeated(number, reader, at: offset), Int.max / 2)
        case .dateTime:
            let reading = textReading { () throws(ReadingError) in try DateTimeText.text(from: reader, at: offset) }
            return (reading, DateTimeText.byteCount)
        case .enumeration(let names, let specials):
            return (
                textReading { () throws(ReadingError) in
                    let code = try reader.byte(at: offset)
                    if let meaning = specials[code] {
                        throw ReadingError(.specialValue, "\(HexText.number(UInt64(code), digits: 2)): \(meaning)")
                    }
                    guard let text = names[code] else {
                        throw ReadingError(.reservedValue, "\(name) code \(code) is reserved for future use")
                    }
                    return text
                }, 1
            )
        case .flagBits(let shift, let width, let names):
            let mask = UInt8(truncatingIfNeeded: (1 << Int(width)) &- 1)
            let code = Int((flags >> shift) & mask)
            let text = code < names.count ? names[code] : String(code)
            return (Reading(name: name, value: .text(text)), 0)
        case .bitNames(let names):
            return (bitNamesReading(names, reader, at: offset), 1)
        }
    }

    private func textReading(_ body: () throws(ReadingError) -> String) -> Reading {
        do throws(ReadingError) {
            return Reading(name: name, value: .text(try body()))
        } catch {
            return .failed(name, error)
        }
    }

    private func repeated(_ number: NumberDescription, _ reader: ByteReader, at offset: Int) -> Reading {
        let size = number.format.byteCount ?? 1
        do throws(ReadingError) {
            let rest = try reader.rest(from: offset).count
            guard rest >= size, rest % size == 0 else {
                // A missing or partial last value: report where the next whole one should be.
                throw .payloadTooShort(needs: size, at: offset &+ rest - rest % size, has: reader.bytes.count)
            }
            var values: [Double] = []
            values.reserveCapacity(rest / size)
            var position = offset
            while position < reader.bytes.count {
                let single = number.reading(named: name, from: reader, at: position)
                guard let value = single.value?.doubleValue else {
                    throw single.error ?? ReadingError(.outOfRange, "value at offset \(position) is not a number")
                }
                values.append(value)
                position &+= size
            }
            return Reading(name: name, value: .numbers(values), unit: number.unit)
        } catch {
            return .failed(name, unit: number.unit, error)
        }
    }

    private func bitNamesReading(_ names: [String], _ reader: ByteReader, at offset: Int) -> Reading {
        do throws(ReadingError) {
            let bits = try reader.byte(at: offset)
            var set: [String] = []
            for (index, bitName) in names.enumerated() where index < 8 && bits & (1 << index) != 0 {
                set.append(bitName)
            }
            let text = set.isEmpty ? "none" : set.joined(separator: ",")
            let known = UInt8(truncatingIfNeeded: (1 << min(names.count, 8)) &- 1)
            let reserved = bits & ~known
            // The known bits are still meaningful, so the text is kept and the reserved bits remarked on.
            let error =
                reserved == 0
                ? nil
                : ReadingError(
                    .reservedFlag,
                    "\(name) \(HexText.number(UInt64(bits), digits: 2)) sets reserved bits "
                        + HexText.number(UInt64(reserved), digits: 2)
                )
            return Reading(name: name, value: .text(text), error: error)
        } catch {
            return .failed(name, error)
        }
    }
}
