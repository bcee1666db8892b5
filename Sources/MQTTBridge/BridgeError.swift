/// Why the bridge could not open its spool or write to it.
///
/// Like the other modules' errors: an extensible `Code`, the file and the system call named, and `errno`.
public struct BridgeError: Error, Sendable, Hashable, CustomStringConvertible {
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        private enum Base: Hashable, Sendable { case spool, unknownDevice, invalidConfiguration }
        private var base: Base
        private init(_ base: Base) { self.base = base }

        /// A file operation on the spool failed (open, write, fdatasync, rename…); `errno` says why.
        public static let spool = Code(.spool)
        /// `submit` named a device the bridge was not configured with.
        public static let unknownDevice = Code(.unknownDevice)
        /// A configuration value cannot work (e.g. a spool limit too small for one record).
        public static let invalidConfiguration = Code(.invalidConfiguration)

        public var description: String {
            switch base {
            case .spool: "spool"
            case .unknownDevice: "unknownDevice"
            case .invalidConfiguration: "invalidConfiguration"
            }
        }
    }

    public var code: Code
    public var message: String
    /// The system call that failed, e.g. `fdatasync`.
    public var call: String?
    public var errno: Int32?
    /// From ``MQTTBridge/submit(device:sequence:succeeded:readings:payload:)``: the record is not in the spool and
    /// will never be sent (it is counted on ``BridgeStatistics/dropped``). False when it was written and only what
    /// came after failed (a sync, removing an old segment): it may still be delivered.
    public var recordLost = false

    public init(code: Code, message: String, call: String? = nil, errno: Int32? = nil) {
        self.code = code
        self.message = message
        self.call = call
        self.errno = errno
    }

    public var description: String {
        var text = "BridgeError.\(code)(\(message)"
        if let call { text += "; \(call)" }
        if let errno { text += ": errno \(errno)" }
        return text + ")"
    }
}
