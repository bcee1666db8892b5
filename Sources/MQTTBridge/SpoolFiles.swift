#if canImport(Glibc)
    import Glibc
#endif

/// Every raw file call of the spool in one place (as swift-system gathers its syscalls), each failure a
/// ``BridgeError`` naming the call, the file and `errno`; EINTR is retried here so that callers never see it.
enum SpoolFiles {
    static func failure(_ call: String, _ path: String, _ error: Int32 = errno) -> BridgeError {
        BridgeError(
            code: .spool, message: "\(call) \(path): \(String(cString: strerror(error)))", call: call, errno: error)
    }

    /// Creates `path` and its missing parents (0700: records may say where someone lives and when).
    static func makeDirectory(_ path: String) throws(BridgeError) {
        var current = path.hasPrefix("/") ? "" : "."
        for component in path.split(separator: "/") {
            current += "/" + component
            if mkdir(current, 0o700) != 0, errno != EEXIST { throw failure("mkdir", current) }
        }
    }

    static func open(_ path: String, _ flags: Int32, mode: mode_t = 0o600) throws(BridgeError) -> Int32 {
        while true {
            let descriptor = Glibc.open(path, flags | O_CLOEXEC, mode)
            if descriptor >= 0 { return descriptor }
            if errno != EINTR { throw failure("open", path) }
        }
    }

    static func close(_ descriptor: Int32) {
        _ = Glibc.close(descriptor)
    }

    /// Writes all of `bytes` at the end (an O_APPEND descriptor).
    static func writeAll(_ descriptor: Int32, _ bytes: [UInt8], path: String) throws(BridgeError) {
        var written = 0
        while written < bytes.count {
            let count = bytes.withUnsafeBytes { raw -> Int in
                guard let base = raw.baseAddress else { return 0 }
                return write(descriptor, base + written, raw.count - written)
            }
            if count < 0, errno == EINTR { continue }
            // 0 for a non-empty write means no progress (a full device that does not say so): fail, never spin.
            guard count > 0 else { throw failure("write", path, count == 0 ? ENOSPC : errno) }
            written += count
        }
    }

    /// Writes all of `bytes` at `offset`.
    static func writeAll(_ descriptor: Int32, _ bytes: [UInt8], at offset: Int, path: String) throws(BridgeError) {
        var written = 0
        while written < bytes.count {
            let count = bytes.withUnsafeBytes { raw -> Int in
                guard let base = raw.baseAddress else { return 0 }
                return pwrite(descriptor, base + written, raw.count - written, off_t(offset + written))
            }
            if count < 0, errno == EINTR { continue }
            guard count > 0 else { throw failure("pwrite", path, count == 0 ? ENOSPC : errno) }
            written += count
        }
    }

    /// Reads up to `count` bytes at `offset`; fewer at the end of the file.
    static func read(_ descriptor: Int32, count: Int, at offset: Int, path: String) throws(BridgeError) -> [UInt8] {
        var buffer = [UInt8](repeating: 0, count: count)
        var total = 0
        while total < count {
            let got = buffer.withUnsafeMutableBytes { raw -> Int in
                guard let base = raw.baseAddress else { return 0 }
                return pread(descriptor, base + total, raw.count - total, off_t(offset + total))
            }
            if got < 0 {
                if errno == EINTR { continue }
                throw failure("pread", path)
            }
            if got == 0 { break }
            total += got
        }
        return Array(buffer[0..<total])
    }

    static func size(_ descriptor: Int32, path: String) throws(BridgeError) -> Int {
        var status = stat()
        guard fstat(descriptor, &status) == 0 else { throw failure("fstat", path) }
        return Int(status.st_size)
    }

    static func truncate(_ descriptor: Int32, to size: Int, path: String) throws(BridgeError) {
        guard ftruncate(descriptor, off_t(size)) == 0 else { throw failure("ftruncate", path) }
    }

    static func dataSync(_ descriptor: Int32, path: String) throws(BridgeError) {
        while fdatasync(descriptor) != 0 {
            if errno != EINTR { throw failure("fdatasync", path) }
        }
    }

    /// fsync of a directory: makes a file created or renamed in it durable.
    static func syncDirectory(_ path: String) throws(BridgeError) {
        let descriptor = try open(path, O_RDONLY | O_DIRECTORY)
        defer { close(descriptor) }
        while fsync(descriptor) != 0 {
            if errno != EINTR { throw failure("fsync", path) }
        }
    }

    static func remove(_ path: String) throws(BridgeError) {
        if unlink(path) != 0, errno != ENOENT { throw failure("unlink", path) }
    }

    static func rename(_ from: String, _ to: String) throws(BridgeError) {
        guard Glibc.rename(from, to) == 0 else { throw failure("rename", to) }
    }

    /// The names in `path` (without `.` and `..`).
    static func list(_ path: String) throws(BridgeError) -> [String] {
        guard let directory = opendir(path) else { throw failure("opendir", path) }
        defer { closedir(directory) }
        var names: [String] = []
        while let entry = readdir(directory) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { raw in
                String(decoding: raw.prefix { $0 != 0 }, as: UTF8.self)
            }
            if name != ".", name != ".." { names.append(name) }
        }
        return names
    }

    /// Replaces the file at `path` with `bytes` atomically (a temporary file, fdatasync, rename, directory
    /// fsync; without `sync`, neither sync): a reader finds the old contents or the new, never a mix.
    static func replace(_ path: String, with bytes: [UInt8], directory: String, sync: Bool = true) throws(BridgeError) {
        let temporary = path + ".new"
        let descriptor = try open(temporary, O_WRONLY | O_CREAT | O_TRUNC)
        do {
            try writeAll(descriptor, bytes, path: temporary)
            if sync { try dataSync(descriptor, path: temporary) }
        } catch {
            close(descriptor)
            throw error
        }
        close(descriptor)
        try rename(temporary, path)
        if sync { try syncDirectory(directory) }
    }

    /// The whole file, or nil when it does not exist.
    static func readFile(_ path: String) throws(BridgeError) -> [UInt8]? {
        let descriptor: Int32
        do {
            descriptor = try open(path, O_RDONLY)
        } catch {
            if error.errno == ENOENT { return nil }
            throw error
        }
        defer { close(descriptor) }
        return try read(descriptor, count: try size(descriptor, path: path), at: 0, path: path)
    }
}
