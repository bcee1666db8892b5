import LocalServices
import Basics

#if canImport(Glibc)
    import Glibc
#endif

/// A TCP listener on 127.0.0.1 that accepts every connection and never says a word (or only its `greeting`): a
/// wedged broker, or another service on the broker's port. It holds each connection open (the client must give up by
/// itself) and counts them, so a test sees a client try again.
///
/// ```swift
/// let silent = try SilentListener()
/// defer { silent.close() }
/// // connect to 127.0.0.1:\(silent.port) …
/// try await waitUntil("a second attempt") { silent.accepted >= 2 }
/// ```
public final class SilentListener: Sendable {
    public let port: Int
    private let listener: Int32
    private let state = Locked((accepted: [Int32](), closed: false))

    /// Listens on a port the kernel picks (binding port 0: a port found free first and bound after could be taken
    /// in between by another test's daemon, EADDRINUSE, as a local `make test` saw) and accepts on a thread of its
    /// own until ``close()``; `greeting` is written to each connection as it is accepted (an SSH server's banner,
    /// say), then nothing more.
    public init(greeting: [UInt8] = []) throws {
        let listener = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard listener >= 0 else { throw SystemCallFailed(errno: errno) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = 0
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(listener, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let named = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(listener, $0, &length) }
        }
        guard bound == 0, named == 0, listen(listener, 16) == 0 else {
            let failure = errno
            Glibc.close(listener)
            throw SystemCallFailed(errno: failure)
        }
        self.port = Int(UInt16(bigEndian: address.sin_port))
        self.listener = listener
        let state = self.state
        startThread {
            while true {
                let connection = accept(listener, nil, nil)
                if connection < 0, errno == EINTR { continue }
                guard connection >= 0 else { break }  // shut down by close()
                let kept = state.withLock { state in
                    guard !state.closed else { return false }
                    state.accepted.append(connection)
                    return true
                }
                if !kept {
                    Glibc.close(connection)
                } else if !greeting.isEmpty {
                    _ = greeting.withUnsafeBytes { send(connection, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
                }
            }
            // Here, not in close(): the descriptor cannot be reused while accept may still be called on it.
            Glibc.close(listener)
        }
    }

    /// How many connections it has accepted.
    public var accepted: Int { state.withLock { $0.accepted.count } }

    /// Stops accepting and closes every connection (the accepting thread ends and closes the listener).
    public func close() {
        let connections = state.withLock { state -> [Int32] in
            guard !state.closed else { return [] }
            state.closed = true
            return state.accepted
        }
        // shutdown wakes the blocked accept; closing the descriptor itself could race with its reuse.
        _ = shutdown(listener, Int32(SHUT_RDWR))
        for connection in connections { Glibc.close(connection) }
    }

    deinit {
        close()
    }
}
