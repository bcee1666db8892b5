import Basics

#if canImport(Glibc)
    import Glibc
#endif

// Threads and files for the helpers, on POSIX calls rather than Foundation: the `keepalive` binary links this
// module (`simulate`, `demo`), and Foundation linked in costs every daemon 4.5 MiB of resident memory
// (Benchmarks/NOTES.md, "RSS").

/// Runs `body` on a detached thread of its own (a blocking read or wait that must not hold a task's thread).
/// A process out of threads stops here with the reason, as Foundation's `Thread.start()` did: these helpers
/// cannot work without one.
package func startThread(_ body: @escaping @Sendable () -> Void) {
    precondition(startDetachedThread(body), "pthread_create failed: the process has no thread to spare")
}

package enum TextFile {
    /// Writes `text` to `path` through a temporary file renamed over it, so a reader never sees half of it.
    package static func write(_ text: String, to path: String) throws(SystemCallFailed) {
        let temporary = path + ".partial"
        let descriptor = open(temporary, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
        guard descriptor >= 0 else { throw SystemCallFailed(errno: errno) }
        var bytes = Array(text.utf8)[...]
        while !bytes.isEmpty {
            let written = bytes.withUnsafeBytes { Glibc.write(descriptor, $0.baseAddress, $0.count) }
            if written < 0, errno == EINTR { continue }
            guard written > 0 else {
                let failure = errno
                close(descriptor)
                unlink(temporary)
                throw SystemCallFailed(errno: failure)
            }
            bytes = bytes.dropFirst(written)
        }
        close(descriptor)
        guard rename(temporary, path) == 0 else {
            let failure = errno
            unlink(temporary)
            throw SystemCallFailed(errno: failure)
        }
    }

    /// The file's text (invalid UTF-8 repaired), nil when it cannot be opened.
    package static func read(_ path: String) -> String? {
        let descriptor = open(path, O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else { return nil }
        defer { close(descriptor) }
        var contents: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 65_536)
        while true {
            let count = buffer.withUnsafeMutableBytes { Glibc.read(descriptor, $0.baseAddress, $0.count) }
            if count < 0, errno == EINTR { continue }
            guard count > 0 else { break }
            contents += buffer[0..<count]
        }
        return String(decoding: contents, as: UTF8.self)
    }
}

/// Removes `path` and everything under it (`rm -rf`, without following symbolic links); errors are ignored, as
/// the helpers only clean up their own temporary directories.
public func removeTree(_ path: String) {
    var status = stat()
    guard lstat(path, &status) == 0 else { return }
    if status.st_mode & S_IFMT == S_IFDIR {
        if let directory = opendir(path) {
            var names: [String] = []
            while let entry = readdir(directory) {
                let name = withUnsafeBytes(of: entry.pointee.d_name) { raw in
                    String(decoding: raw.prefix { $0 != 0 }, as: UTF8.self)
                }
                if name != "." && name != ".." { names.append(name) }
            }
            closedir(directory)
            for name in names { removeTree(path + "/" + name) }
        }
        rmdir(path)
    } else {
        unlink(path)
    }
}
