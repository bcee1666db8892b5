import DBus
import LocalServices
import TestHarness
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// Plain-POSIX helpers for the file-descriptor tests: pipes, reads and writes that never block, and a count of
/// this process's open descriptors.
enum Descriptors {
    /// A non-blocking pipe as two owners (of close-on-exec duplicates); the raw ends are closed at once.
    static func pipe() throws -> (read: UnixFileDescriptor, write: UnixFileDescriptor) {
        var ends: [Int32] = [-1, -1]
        guard Glibc.pipe(&ends) == 0 else { throw Failure("pipe: errno \(errno)") }
        defer {
            close(ends[0])
            close(ends[1])
        }
        // O_NONBLOCK belongs to the open pipe, so every duplicate (also those sent over the bus) shares it.
        for end in ends {
            guard fcntl(end, F_SETFL, fcntl(end, F_GETFL) | O_NONBLOCK) == 0 else {
                throw Failure("fcntl: errno \(errno)")
            }
        }
        return (try UnixFileDescriptor(duplicating: ends[0]), try UnixFileDescriptor(duplicating: ends[1]))
    }

    /// Writes `text` into `descriptor` in one `write`.
    static func write(_ text: String, to descriptor: UnixFileDescriptor) throws {
        guard let raw = descriptor.rawValue else { throw Failure("write to a closed descriptor") }
        let bytes = Array(text.utf8)
        guard Glibc.write(raw, bytes, bytes.count) == bytes.count else { throw Failure("write: errno \(errno)") }
    }

    /// What one non-blocking read finds.
    enum ReadResult: Equatable {
        case data(String)
        /// Nothing to read now, but a writer is still open (EAGAIN).
        case empty
        /// Every writer is closed.
        case endOfFile
    }

    /// One non-blocking `read` of up to 256 bytes.
    static func read(_ descriptor: UnixFileDescriptor) throws -> ReadResult {
        guard let raw = descriptor.rawValue else { throw Failure("read from a closed descriptor") }
        var buffer = [UInt8](repeating: 0, count: 256)
        let count = Glibc.read(raw, &buffer, buffer.count)
        if count > 0 { return .data(String(decoding: buffer.prefix(count), as: UTF8.self)) }
        if count == 0 { return .endOfFile }
        if errno == EAGAIN || errno == EWOULDBLOCK { return .empty }
        throw Failure("read: errno \(errno)")
    }

    /// True when both descriptors refer to the same file (device and inode, as `fstat` reports them).
    static func sameFile(_ first: UnixFileDescriptor, _ second: UnixFileDescriptor) -> Bool {
        guard let a = first.rawValue, let b = second.rawValue else { return false }
        var statA = stat()
        var statB = stat()
        guard fstat(a, &statA) == 0, fstat(b, &statB) == 0 else { return false }
        return statA.st_dev == statB.st_dev && statA.st_ino == statB.st_ino
    }

    /// The highest descriptor number this process has open.
    static func highestOpen() -> Int32 {
        var highest: Int32 = -1
        forEachOpen { highest = max(highest, $0) }
        return highest
    }

    /// Waits up to 20 s for the process's descriptor count to fall to `baseline` (other suites open and close
    /// descriptors meanwhile, so ≤), then expects it, with `detail` in the failure. A leak never comes back; a
    /// parallel suite's connections do, once it finishes them (a full run measured 91 against 87 after 2 s: two
    /// connections of another suite, open a few seconds).
    static func expectBack(
        to baseline: Int, _ detail: @autoclosure () -> String, sourceLocation: SourceLocation = #_sourceLocation
    ) async {
        // The wait's own answer: a count read again afterwards can include a descriptor another suite has just
        // opened.
        let back = (try? await waitUntil("the descriptor count is back", timeout: .seconds(20)) {
            openCount() <= baseline
        }) != nil
        #expect(back, "\(detail()), now \(openCount()) against \(baseline)", sourceLocation: sourceLocation)
    }

    /// How many descriptors this process has open: the entries of /proc/self/fd, less the one reading it.
    /// How many open descriptors refer to the same open file as `descriptor` (both ends of a pipe link to the
    /// same `pipe:[inode]`), itself included: a count no other suite's descriptors can change.
    static func count(sharingFileWith descriptor: Int32) -> Int {
        let target = link(descriptor)
        var count = 0
        forEachOpen { if link($0) == target { count += 1 } }
        return count
    }

    private static func link(_ descriptor: Int32) -> String {
        var buffer = [CChar](repeating: 0, count: 256)
        let length = readlink("/proc/self/fd/\(descriptor)", &buffer, buffer.count - 1)
        return length > 0 ? String(decoding: buffer[0..<length].map { UInt8(bitPattern: $0) }, as: UTF8.self) : ""
    }

    static func openCount() -> Int {
        var count = 0
        forEachOpen { _ in count += 1 }
        return count
    }

    /// Calls `body` with every open descriptor number but the one listing /proc/self/fd.
    private static func forEachOpen(_ body: (Int32) -> Void) {
        guard let directory = opendir("/proc/self/fd") else { return }
        defer { closedir(directory) }
        let own = dirfd(directory)
        while let entry = readdir(directory) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) {
                String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self)
            }
            if let number = Int32(name), number != own { body(number) }
        }
    }

    struct Failure: Error, CustomStringConvertible {
        var description: String
        init(_ description: String) { self.description = description }
    }
}

/// A service on a connection of its own, exporting `/org/example/Files` with methods that hand out descriptors.
struct FileService: Sendable {
    static let path: ObjectPath = "/org/example/Files"
    static let interface = "org.example.Files"

    let connection: DBusConnection

    /// `Get` returns `descriptor` (a duplicate of it travels; the service keeps its own); `TakeTwo` decodes
    /// its arguments strictly as `(h, u)` and fails otherwise.
    static func start(on connection: DBusConnection, handing descriptor: UnixFileDescriptor) async throws -> FileService
    {
        let object = DBusObject(interfaces: [
            DBusInterface(
                interface,
                methods: [
                    DBusMethod("Get", out: "h") { _ in [.unixFileDescriptor(descriptor)] },
                    DBusMethod("TakeTwo", in: nil, out: "") { call in
                        _ = try call.arguments.decode(UnixFileDescriptor.self, UInt32.self)
                        return []
                    },
                ])
        ])
        try await connection.export(object, at: path)
        return FileService(connection: connection)
    }

    func call(_ client: DBusConnection, _ method: String, _ arguments: [DBusValue] = []) async throws -> [DBusValue] {
        try await client.call(
            destination: connection.uniqueName, path: Self.path, interface: Self.interface, method: method,
            arguments: arguments)
    }
}
