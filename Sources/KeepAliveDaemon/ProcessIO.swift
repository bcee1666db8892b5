internal import Dispatch

#if canImport(Glibc)
internal import Glibc
#endif

/// The process's raw output and signals, shared by the daemon and the `keepalive` command.
public enum ProcessIO {
    /// Writes all of `text` to `descriptor` with `write(2)` (no stdio buffer: a line is out when this
    /// returns), retrying on EINTR and short writes. Returns the errno that stopped it, or `nil`.
    @discardableResult
    public static func write(_ text: String, to descriptor: Int32) -> Int32? {
        var text = text
        return text.withUTF8 { buffer -> Int32? in
            guard let base = buffer.baseAddress else { return nil }
            var offset = 0
            while offset < buffer.count {
                let written = Glibc.write(descriptor, base + offset, buffer.count - offset)
                if written < 0 {
                    if errno == EINTR { continue }
                    return errno
                }
                if written == 0 { return EIO }
                offset += written
            }
            return nil
        }
    }

    /// The given signals as a stream (their default actions are switched off while it is in use). Call
    /// `cancel` when done: it stops the sources and ends the stream.
    public static func signals(_ numbers: [Int32]) -> (stream: AsyncStream<Int32>, cancel: @Sendable () -> Void) {
        let (stream, continuation) = AsyncStream<Int32>.makeStream()
        let sources = numbers.map { number in
            signal(number, SIG_IGN)
            let source = DispatchSource.makeSignalSource(signal: number, queue: .global())
            source.setEventHandler { continuation.yield(number) }
            source.resume()
            return source
        }
        let box = SignalSources(sources)
        return (stream, {
            box.cancel()
            continuation.finish()
        })
    }
}

/// Keeps the dispatch sources alive until cancelled.
private final class SignalSources: @unchecked Sendable {
    // @unchecked Sendable: `sources` is set once in init; DispatchSource.cancel is thread-safe.
    private let sources: [any DispatchSourceSignal]

    init(_ sources: [any DispatchSourceSignal]) {
        self.sources = sources
    }

    func cancel() {
        for source in sources { source.cancel() }
    }
}
