#if canImport(Glibc)
    import Glibc
#endif

/// Small state files, read whole and replaced atomically (a new file, `fsync`, `rename`, the directory's `fsync`):
/// a crash leaves the old contents or the new, never half of them. For the deferred tasks' list and the history
/// positions; the spool and the metrics' textfile have their own, tuned ways.
package enum AtomicFile {
    /// What failed, and on which file.
    package struct Failure: Error, Sendable, Hashable, CustomStringConvertible {
        package var path: String
        package var message: String

        package init(path: String, _ message: String) {
            self.path = path
            self.message = message
        }

        package var description: String { "\(path): \(message)" }
    }

    /// How large a state file may be read: 16 MiB. The largest written today, the deferred tasks' list, holds
    /// about 170 bytes per request, so 10,000 devices with history and clock sync come to 3.4 MB. Sized by what the
    /// daemon writes, never by the 16 KiB that bounds what arrives over the network (`JSONParser.maximumBytes`):
    /// read with that, the tasks' list was refused past about 95 requests (48 devices with history and clock
    /// sync), and the history positions past about 170 devices.
    package static let limit = 16 << 20

    /// The whole file; `nil` when it does not exist.
    package static func read(_ path: String, limit: Int = AtomicFile.limit) throws(AtomicFile.Failure) -> [UInt8]? {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else {
            if errno == ENOENT { return nil }
            throw Failure(path: path, "cannot open: \(String(cString: strerror(errno)))")
        }
        defer { close(fd) }
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 4_096)
        while true {
            let count = chunk.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress, $0.count) }
            if count < 0, errno == EINTR { continue }
            guard count >= 0 else {
                throw Failure(path: path, "cannot read: \(String(cString: strerror(errno)))")
            }
            if count == 0 { return bytes }
            bytes += chunk.prefix(count)
            guard bytes.count <= limit else { throw Failure(path: path, "larger than \(limit) bytes") }
        }
    }

    package static func replace(_ path: String, with bytes: [UInt8]) throws(AtomicFile.Failure) {
        let temporary = path + ".new"
        let fd = open(temporary, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
        guard fd >= 0 else {
            throw Failure(path: temporary, "cannot create: \(String(cString: strerror(errno)))")
        }
        var written = 0
        while written < bytes.count {
            let count = bytes.withUnsafeBytes { Glibc.write(fd, $0.baseAddress! + written, $0.count - written) }
            if count < 0, errno == EINTR { continue }
            guard count > 0 else {
                let reason = String(cString: strerror(errno))
                close(fd)
                unlink(temporary)
                throw Failure(path: temporary, "cannot write: \(reason)")
            }
            written += count
        }
        let synced = fsync(fd) == 0
        let reason = String(cString: strerror(errno))
        close(fd)
        guard synced, rename(temporary, path) == 0 else {
            let reason = synced ? String(cString: strerror(errno)) : reason
            unlink(temporary)
            throw Failure(path: path, "cannot replace: \(reason)")
        }
        let directory = path.lastIndex(of: "/").map { String(path[..<$0]) } ?? "."
        let directoryFD = open(directory.isEmpty ? "/" : directory, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        if directoryFD >= 0 {
            _ = fsync(directoryFD)
            close(directoryFD)
        }
    }
}
