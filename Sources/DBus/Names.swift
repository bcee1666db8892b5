#if canImport(Glibc)
import Glibc
#endif

/// Validation of the names libdbus would otherwise abort on.
///
/// libdbus treats an invalid path, interface, member, bus name or signature handed to most of its API as a
/// programmer error and aborts the process. Everything that reaches libdbus from this module passes through
/// these checks first, so a bad name becomes a thrown `DBusError.Code.invalidArgument`.
enum Names {
    /// D-Bus strings may not contain NUL, and C strings would silently cut there.
    static func hasNoNUL(_ string: String) -> Bool {
        // memchr on the contiguous UTF-8: every name of every message passes here.
        var string = string
        return string.withUTF8 { bytes in
            guard let base = bytes.baseAddress, !bytes.isEmpty else { return true }
            return memchr(base, 0, bytes.count) == nil
        }
    }

    static func isValidPath(_ path: String) -> Bool {
        hasNoNUL(path) && libdbus_validate_path(path)
    }

    static func isValidSignature(_ signature: String) -> Bool {
        hasNoNUL(signature) && libdbus_signature_validate(signature)
    }

    static func checkInterface(_ name: String) throws {
        guard hasNoNUL(name), libdbus_validate_interface(name) else {
            throw DBusError.invalidArgument("'\(name)' is not a valid D-Bus interface name")
        }
    }

    static func checkMember(_ name: String) throws {
        guard hasNoNUL(name), libdbus_validate_member(name) else {
            throw DBusError.invalidArgument("'\(name)' is not a valid D-Bus member name")
        }
    }

    static func checkBusName(_ name: String) throws {
        guard hasNoNUL(name), libdbus_validate_bus_name(name) else {
            throw DBusError.invalidArgument("'\(name)' is not a valid D-Bus bus name")
        }
    }

    static func isValidErrorName(_ name: String) -> Bool {
        hasNoNUL(name) && libdbus_validate_error_name(name)
    }
}
