import CDBus

// Reading and writing message arguments. Values are checked completely before the first byte is written:
// libdbus has no way to take back a half-written argument list, and handing it an ill-typed array element or
// an invalid name aborts the process.

extension DBusMessage {
    /// The D-Bus limit on a signature's length.
    static let maximumSignatureLength = 255
    /// The D-Bus limit on container nesting (32 arrays plus 32 structs).
    static let maximumContainerDepth = 64

    /// Appends `values` as the message's arguments, after checking that all of them are valid D-Bus.
    ///
    /// Unix file descriptors are duplicated into the message (libdbus owns the copies and closes them with the
    /// message); a closed `UnixFileDescriptor` throws `DBusError.Code.invalidArgument`.
    func appendArguments(_ values: [DBusValue]) throws {
        guard !values.isEmpty else { return }
        for value in values { try value.checkForWire(depth: 0) }
        let signature = values.signature
        guard signature.rawValue.utf8.count <= Self.maximumSignatureLength else {
            throw DBusError.invalidArgument("the arguments' signature is longer than 255 characters")
        }
        var iterator = MessageIterator()
        libdbus_message_iter_init_append(pointer, &iterator)
        for value in values { try Self.append(value, to: &iterator) }
    }

    /// True when the message carries Unix file descriptors (`dbus_message_contains_unix_fds`).
    var containsUnixFileDescriptors: Bool { libdbus_message_contains_unix_fds(pointer) }

    /// Reads every argument of the message. Every Unix file descriptor in it comes out as a new
    /// `UnixFileDescriptor` that owns its own duplicate: dropping the values closes them, also when reading
    /// throws halfway.
    func arguments() throws -> [DBusValue] {
        var iterator = MessageIterator()
        guard libdbus_message_iter_init(pointer, &iterator) else { return [] }
        var values: [DBusValue] = []
        while libdbus_message_iter_get_arg_type(&iterator) != CDBUS_TYPE_INVALID {
            values.append(try Self.read(&iterator))
            _ = libdbus_message_iter_next(&iterator)
        }
        return values
    }

    // MARK: Writing

    /// Writes one already checked value. Throws `outOfMemory` when libdbus ran out of memory, `invalidArgument`
    /// for a Unix file descriptor closed since it was checked, `systemCall` for one libdbus could not duplicate.
    private static func append(_ value: DBusValue, to iterator: inout MessageIterator) throws {
        let written: Bool
        switch value {
        case .byte(let v): written = libdbus_message_iter_append_basic(&iterator, CDBUS_TYPE_BYTE, v)
        case .boolean(let v):
            written = libdbus_message_iter_append_basic(&iterator, CDBUS_TYPE_BOOLEAN, dbus_bool_t(v ? 1 : 0))
        case .int16(let v): written = libdbus_message_iter_append_basic(&iterator, CDBUS_TYPE_INT16, v)
        case .uint16(let v): written = libdbus_message_iter_append_basic(&iterator, CDBUS_TYPE_UINT16, v)
        case .int32(let v): written = libdbus_message_iter_append_basic(&iterator, CDBUS_TYPE_INT32, v)
        case .uint32(let v): written = libdbus_message_iter_append_basic(&iterator, CDBUS_TYPE_UINT32, v)
        case .int64(let v): written = libdbus_message_iter_append_basic(&iterator, CDBUS_TYPE_INT64, v)
        case .uint64(let v): written = libdbus_message_iter_append_basic(&iterator, CDBUS_TYPE_UINT64, v)
        case .double(let v): written = libdbus_message_iter_append_basic(&iterator, CDBUS_TYPE_DOUBLE, v)
        case .string(let v): written = libdbus_message_iter_append_string(&iterator, CDBUS_TYPE_STRING, v)
        case .objectPath(let v):
            written = libdbus_message_iter_append_string(&iterator, CDBUS_TYPE_OBJECT_PATH, v.rawValue)
        case .signature(let v):
            written = libdbus_message_iter_append_string(&iterator, CDBUS_TYPE_SIGNATURE, v.rawValue)
        case .unixFileDescriptor(let descriptor):
            try appendUnixFileDescriptor(descriptor, to: &iterator)
            return
        case .bytes(let bytes):
            try appendContainer(CDBUS_TYPE_ARRAY, "y", to: &iterator) { sub in
                guard bytes.isEmpty || libdbus_message_iter_append_bytes(&sub, bytes) else {
                    throw DBusError.outOfMemory
                }
            }
            return
        case .array(let element, let values):
            try appendContainer(CDBUS_TYPE_ARRAY, element.rawValue, to: &iterator) { sub in
                for value in values { try append(value, to: &sub) }
            }
            return
        case .dictionary(let key, let value, let entries):
            let entrySignature = "{" + key.rawValue + value.rawValue + "}"
            try appendContainer(CDBUS_TYPE_ARRAY, entrySignature, to: &iterator) { sub in
                for entry in entries {
                    try appendContainer(CDBUS_TYPE_DICT_ENTRY, nil, to: &sub) { entryIterator in
                        try append(entry.key, to: &entryIterator)
                        try append(entry.value, to: &entryIterator)
                    }
                }
            }
            return
        case .structure(let fields):
            try appendContainer(CDBUS_TYPE_STRUCT, nil, to: &iterator) { sub in
                for field in fields { try append(field, to: &sub) }
            }
            return
        case .variant(let inner):
            try appendContainer(CDBUS_TYPE_VARIANT, inner.signature.rawValue, to: &iterator) { sub in
                try append(inner, to: &sub)
            }
            return
        }
        guard written else { throw DBusError.outOfMemory }
    }

    /// Appends a duplicate of `descriptor` (libdbus makes it), holding the descriptor's lock so that a
    /// concurrent `close()` cannot hand libdbus a number that already names another file.
    private static func appendUnixFileDescriptor(
        _ descriptor: UnixFileDescriptor, to iterator: inout MessageIterator
    ) throws {
        try descriptor.withRawValue { raw in
            guard let raw else { throw closedDescriptor }
            guard libdbus_message_iter_append_unix_fd(&iterator, raw) else {
                let error = SystemErrno.current
                throw DBusError(
                    code: .systemCall,
                    message: "libdbus could not add file descriptor \(raw) to the message (dup: \(error))")
            }
        }
    }

    /// Opens a container, fills it with `body` and closes it, or abandons it when anything failed.
    private static func appendContainer(
        _ type: Int32, _ signature: String?, to iterator: inout MessageIterator,
        _ body: (inout MessageIterator) throws -> Void
    ) throws {
        var sub = MessageIterator()
        guard libdbus_message_iter_open_container(&iterator, type, signature, &sub) else {
            throw DBusError.outOfMemory
        }
        do {
            try body(&sub)
            guard libdbus_message_iter_close_container(&iterator, &sub) else { throw DBusError.outOfMemory }
        } catch {
            libdbus_message_iter_abandon_container_if_open(&iterator, &sub)
            throw error
        }
    }

    static var closedDescriptor: DBusError {
        DBusError.invalidArgument("a closed UnixFileDescriptor cannot be sent")
    }

    // MARK: Reading

    /// Walks an `a{oa{sa{sv}}}` reply (GetManagedObjects) without building it: `body` gets each interface of each
    /// object, its properties with their `v` taken off, while the message is read. Throws `typeMismatch` for any
    /// other signature, or what `body` throws.
    func forEachManagedObject(_ body: (ObjectPath, String, [String: DBusValue]) throws -> Void) throws {
        let signature = libdbus_message_get_signature(pointer)
        guard signature == "a{oa{sa{sv}}}" else {
            throw DBusError.typeMismatch(expected: "a{oa{sa{sv}}}", found: signature)
        }
        var iterator = MessageIterator()
        guard libdbus_message_iter_init(pointer, &iterator) else { return }
        try Self.forEachEntry(of: &iterator) { path, interfaces in
            try Self.forEachEntry(of: &interfaces) { interface, properties in
                try body(ObjectPath(unchecked: path), interface, try Self.readProperties(&properties))
            }
        }
    }

    /// Calls `body` with each entry of the dictionary `iterator` is at (a string or object path key): the key, and
    /// an iterator at the entry's value.
    static func forEachEntry(
        of iterator: inout MessageIterator, _ body: (String, inout MessageIterator) throws -> Void
    ) rethrows {
        var entries = MessageIterator()
        libdbus_message_iter_recurse(&iterator, &entries)
        while libdbus_message_iter_get_arg_type(&entries) != CDBUS_TYPE_INVALID {
            var entry = MessageIterator()
            libdbus_message_iter_recurse(&entries, &entry)
            let key = libdbus_message_iter_get_string(&entry)
            _ = libdbus_message_iter_next(&entry)
            try body(key, &entry)
            _ = libdbus_message_iter_next(&entries)
        }
    }

    static func read(_ iterator: inout MessageIterator) throws -> DBusValue {
        let type = libdbus_message_iter_get_arg_type(&iterator)
        switch type {
        case CDBUS_TYPE_BYTE: return .byte(libdbus_message_iter_get_basic(&iterator).byt)
        case CDBUS_TYPE_BOOLEAN: return .boolean(libdbus_message_iter_get_basic(&iterator).bool_val != 0)
        case CDBUS_TYPE_INT16: return .int16(libdbus_message_iter_get_basic(&iterator).i16)
        case CDBUS_TYPE_UINT16: return .uint16(libdbus_message_iter_get_basic(&iterator).u16)
        case CDBUS_TYPE_INT32: return .int32(libdbus_message_iter_get_basic(&iterator).i32)
        case CDBUS_TYPE_UINT32: return .uint32(libdbus_message_iter_get_basic(&iterator).u32)
        case CDBUS_TYPE_INT64: return .int64(Int64(libdbus_message_iter_get_basic(&iterator).i64))
        case CDBUS_TYPE_UINT64: return .uint64(UInt64(libdbus_message_iter_get_basic(&iterator).u64))
        case CDBUS_TYPE_DOUBLE: return .double(libdbus_message_iter_get_basic(&iterator).dbl)
        case CDBUS_TYPE_STRING: return .string(libdbus_message_iter_get_string(&iterator))
        case CDBUS_TYPE_OBJECT_PATH:
            return .objectPath(ObjectPath(unchecked: libdbus_message_iter_get_string(&iterator)))
        case CDBUS_TYPE_SIGNATURE:
            return .signature(DBusSignature(unchecked: libdbus_message_iter_get_string(&iterator)))
        case CDBUS_TYPE_UNIX_FD:
            // A new descriptor, ours to close: owned at once, so nothing thrown later can leak it.
            let descriptor = libdbus_message_iter_get_unix_fd(&iterator)
            guard descriptor >= 0 else {
                throw DBusError(
                    code: .systemCall,
                    message: "libdbus gave no Unix file descriptor for an 'h' (its dup failed, or the message names a "
                        + "descriptor it does not carry; errno: \(SystemErrno.current))")
            }
            return .unixFileDescriptor(UnixFileDescriptor(adopting: descriptor))
        case CDBUS_TYPE_ARRAY:
            return try readArray(&iterator)
        case CDBUS_TYPE_STRUCT:
            var sub = MessageIterator()
            libdbus_message_iter_recurse(&iterator, &sub)
            var fields: [DBusValue] = []
            while libdbus_message_iter_get_arg_type(&sub) != CDBUS_TYPE_INVALID {
                fields.append(try read(&sub))
                _ = libdbus_message_iter_next(&sub)
            }
            return .structure(fields)
        case CDBUS_TYPE_VARIANT:
            var sub = MessageIterator()
            libdbus_message_iter_recurse(&iterator, &sub)
            return .variant(try read(&sub))
        default:
            throw DBusError(code: .unsupportedType, message: "unknown D-Bus type code \(type) in a message")
        }
    }

    private static func readArray(_ iterator: inout MessageIterator) throws -> DBusValue {
        let elementType = libdbus_message_iter_get_element_type(&iterator)
        if elementType == CDBUS_TYPE_BYTE {
            return .bytes(libdbus_message_iter_get_byte_array(&iterator))
        }
        // The array's own signature ("a…") keeps the element type even when the array is empty.
        let arraySignature = libdbus_message_iter_get_signature(&iterator)
        var sub = MessageIterator()
        libdbus_message_iter_recurse(&iterator, &sub)
        if elementType == CDBUS_TYPE_DICT_ENTRY {
            // "a{" key value "}": the key is always one basic type code.
            let inner = arraySignature.dropFirst(2).dropLast()
            let key = DBusSignature(unchecked: String(inner.prefix(1)))
            let value = DBusSignature(unchecked: String(inner.dropFirst()))
            var entries: [DBusDictionaryEntry] = []
            while libdbus_message_iter_get_arg_type(&sub) != CDBUS_TYPE_INVALID {
                var entryIterator = MessageIterator()
                libdbus_message_iter_recurse(&sub, &entryIterator)
                let entryKey = try read(&entryIterator)
                _ = libdbus_message_iter_next(&entryIterator)
                let entryValue = try read(&entryIterator)
                entries.append(DBusDictionaryEntry(key: entryKey, value: entryValue))
                _ = libdbus_message_iter_next(&sub)
            }
            return .dictionary(key: key, value: value, entries)
        }
        var values: [DBusValue] = []
        while libdbus_message_iter_get_arg_type(&sub) != CDBUS_TYPE_INVALID {
            values.append(try read(&sub))
            _ = libdbus_message_iter_next(&sub)
        }
        return .array(element: DBusSignature(unchecked: String(arraySignature.dropFirst())), values)
    }
}

// MARK: - Checking values before they are written

extension DBusValue {
    /// Throws unless this value can be written as it is: strings without NUL, arrays whose elements all have
    /// the declared element type, dictionary keys of a basic type, non-empty structs, open Unix file descriptors,
    /// bounded depth.
    func checkForWire(depth: Int) throws {
        switch self {
        case .unixFileDescriptor(let descriptor):
            guard descriptor.rawValue != nil else { throw DBusMessage.closedDescriptor }
        case .string(let v):
            guard Names.hasNoNUL(v) else { throw DBusError.invalidArgument("D-Bus strings cannot contain NUL") }
        case .array(let element, let values):
            try Self.checkContainerType(element, depth: depth)
            for value in values {
                guard value.hasSignature(element) else {
                    throw DBusError.typeMismatch(
                        expected: element.rawValue, found: value.signature.rawValue, context: "array element")
                }
                try value.checkForWire(depth: depth + 1)
            }
        case .dictionary(let key, let value, let entries):
            guard key.rawValue.utf8.count == 1, let code = key.rawValue.utf8.first,
                Self.basicTypeCodes.contains(code)
            else { throw DBusError.invalidArgument("dictionary keys must have a basic type, not '\(key)'") }
            try Self.checkContainerType(value, depth: depth)
            for entry in entries {
                guard entry.key.hasSignature(key), entry.value.hasSignature(value) else {
                    throw DBusError.typeMismatch(
                        expected: "{\(key)\(value)}",
                        found: "{\(entry.key.signature)\(entry.value.signature)}", context: "dictionary entry")
                }
                try entry.key.checkForWire(depth: depth + 1)
                try entry.value.checkForWire(depth: depth + 1)
            }
        case .structure(let fields):
            guard !fields.isEmpty else { throw DBusError.invalidArgument("D-Bus structs need at least one field") }
            guard depth < DBusMessage.maximumContainerDepth else { throw Self.tooDeep }
            for field in fields { try field.checkForWire(depth: depth + 1) }
        case .variant(let inner):
            guard depth < DBusMessage.maximumContainerDepth else { throw Self.tooDeep }
            try inner.checkForWire(depth: depth + 1)
        default:
            break
        }
    }

    /// True when this value has exactly `signature`, without building a string for basic types.
    func hasSignature(_ signature: DBusSignature) -> Bool {
        let utf8 = signature.rawValue.utf8
        if utf8.count == 1 { return typeCode == utf8.first }
        return self.signature == signature
    }

    private static func checkContainerType(_ element: DBusSignature, depth: Int) throws {
        guard depth < DBusMessage.maximumContainerDepth else { throw tooDeep }
        guard element.isSingleCompleteType else {
            throw DBusError.invalidArgument("'\(element)' is not a single complete type")
        }
    }

    private static let basicTypeCodes = Set("ybnqiuxtdsogh".utf8)

    private static var tooDeep: DBusError {
        DBusError.invalidArgument("values are nested deeper than D-Bus allows (64 containers)")
    }
}
