#if canImport(Glibc)
import Glibc
#endif

extension MQTTClient {
    /// Reads a password from the file at `path` (the configuration names a file, so the secret stays out of
    /// the configuration and the process list): its content with one trailing newline removed, and whether
    /// the file is readable by everyone (the daemon warns then).
    ///
    /// - Throws: `.systemCall` naming the path and `errno`'s text; the content never appears in an error.
    public static func readPassword(from path: String) throws(MQTTError) -> (password: String, worldReadable: Bool) {
        let descriptor = open(path, O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else { throw fileError("open", path) }
        defer { Glibc.close(descriptor) }
        var status = stat()
        guard fstat(descriptor, &status) == 0 else { throw fileError("fstat", path) }
        var bytes: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 4_096)
        while true {
            let count = buffer.withUnsafeMutableBytes { read(descriptor, $0.baseAddress, $0.count) }
            if count < 0, errno == EINTR { continue }
            guard count >= 0 else { throw fileError("read", path) }
            if count == 0 { break }
            bytes.append(contentsOf: buffer[0..<count])
            guard bytes.count <= 65_535 else {
                throw MQTTError(code: .invalidArgument, message: "the password file \(path) is longer than 65535 bytes")
            }
        }
        if bytes.last == UInt8(ascii: "\n") { bytes.removeLast() }
        if bytes.last == UInt8(ascii: "\r") { bytes.removeLast() }
        return (String(decoding: bytes, as: UTF8.self), status.st_mode & S_IROTH != 0)
    }

    private static func fileError(_ call: String, _ path: String) -> MQTTError {
        MQTTError(
            code: .systemCall, call: call, libraryText: String(cString: strerror(errno)),
            message: "cannot read the password file \(path)")
    }
}
