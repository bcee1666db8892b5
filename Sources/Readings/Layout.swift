/// The configured layout of a vendor characteristic: its fields and, when known, its size.
public struct Layout: Sendable, Hashable {
    /// The fields, decoded in this order.
    public var fields: [Field]
    /// The payload's declared size in bytes, when the configuration states it; used only to
    /// check that no field runs past it.
    public var size: Int?

    /// Creates a layout.
    public init(fields: [Field], size: Int? = nil) {
        self.fields = fields
        self.size = size
    }

    /// Every problem with the layout: each field's own (see ``Field/validate()``), duplicate names,
    /// a negative size, and — when ``size`` is known — fields that run past it. Text and hex fields
    /// take the rest of the payload, so they must start at or before the end.
    public func validate() -> [ReadingError] {
        var errors = fields.flatMap { $0.validate() }
        var seen: Set<String> = []
        for field in fields where !seen.insert(field.name).inserted {
            errors.append(ReadingError(.invalidLayout, "field name \"\(field.name)\" is used more than once"))
        }
        if let size {
            if size < 0 {
                errors.append(ReadingError(.invalidLayout, "size \(size) is negative"))
            } else {
                for field in fields where field.at >= 0 {
                    let needed = field.format.byteCount ?? 0
                    if field.at > size || needed > size - field.at {
                        errors.append(ReadingError(
                            .invalidLayout,
                            "field \"\(field.name)\" needs \(needed) bytes at offset \(field.at), past the size \(size)"
                        ))
                    }
                }
            }
        }
        if fields.isEmpty { errors.append(ReadingError(.invalidLayout, "the layout has no fields")) }
        return errors
    }

    /// Decodes every field; bytes no field covers are ignored.
    func readings(from bytes: [UInt8]) -> [Reading] {
        let reader = ByteReader(bytes)
        return fields.map { $0.reading(from: reader) }
    }
}
