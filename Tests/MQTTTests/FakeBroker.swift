import LocalServices
import TestHarness
import Foundation
import Basics

#if canImport(Glibc)
    import Glibc
#endif

/// A scripted MQTT server for what a real mosquitto 2.0 will not do: refuse MQTT 5 as a 3.1.1-only broker
/// does (a v3 CONNACK "unacceptable protocol version"), refuse a subscription (SUBACK 0x80 / 0x87), or drop
/// the connection at an exact PUBLISH.
/// One thread, blocking sockets, one connection at a time.
final class FakeBroker: Sendable {
    struct Behaviour: Sendable {
        /// Answer an MQTT 5 CONNECT as a 3.1.1 broker does, and close.
        var refusesMQTT5 = false
        /// Answer every SUBSCRIBE with a failure.
        var refusesSubscriptions = false
        /// Acknowledge this many QoS 1 PUBLISHes on each connection, then close it when the next one comes.
        var acknowledgedPublishes = Int.max
    }

    let port: Int
    private let listener: Int32
    /// The protocol level of each CONNECT received (4: 3.1.1, 5: MQTT 5).
    private let levels = Locked([UInt8]())
    /// The payload of each PUBLISH received, in arrival order (the one that closed a connection included).
    private let publishes = Locked([[UInt8]]())

    init(_ behaviour: Behaviour) throws {
        listener = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let listener = self.listener
        let bound = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(listener, $0, length) }
        }
        guard bound == 0, listen(listener, 4) == 0 else { throw SystemCallFailed(errno: errno) }
        _ = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(listener, $0, &length) }
        }
        port = Int(UInt16(bigEndian: address.sin_port))
        let levels = self.levels
        let publishes = self.publishes
        Thread {
            while true {
                let connection = accept(listener, nil, nil)
                guard connection >= 0 else { return }  // the listener was shut down
                FakeBroker.serve(connection, behaviour, levels, publishes)
                close(connection)
            }
        }.start()
    }

    var connectLevels: [UInt8] { levels.withLock { $0 } }
    var publishedPayloads: [[UInt8]] { publishes.withLock { $0 } }

    func stop() {
        shutdown(listener, Int32(SHUT_RDWR))
        close(listener)
    }

    private static func serve(
        _ connection: Int32, _ behaviour: Behaviour, _ levels: Locked<[UInt8]>, _ publishes: Locked<[[UInt8]]>
    ) {
        var level: UInt8 = 4
        var acknowledged = 0
        while let (type, body) = readPacket(connection) {
            switch type >> 4 {
            case 1:  // CONNECT: 00 04 'M' 'Q' 'T' 'T' level …
                level = body.count > 6 ? body[6] : 4
                levels.withLock { $0.append(level) }
                if level == 5, behaviour.refusesMQTT5 {
                    send(connection, [0x20, 0x02, 0x00, 0x01])
                    return
                }
                send(connection, level == 5 ? [0x20, 0x03, 0x00, 0x00, 0x00] : [0x20, 0x02, 0x00, 0x00])
            case 8:  // SUBSCRIBE: packet id …
                let granted: UInt8 = behaviour.refusesSubscriptions ? (level == 5 ? 0x87 : 0x80) : 0x00
                send(
                    connection,
                    level == 5
                        ? [0x90, 0x04, body[0], body[1], 0x00, granted] : [0x90, 0x03, body[0], body[1], granted])
            case 3:  // PUBLISH: topic length, topic, packet id (QoS > 0), properties (MQTT 5), payload
                let qos = (type >> 1) & 3
                let topicLength = Int(body[0]) << 8 | Int(body[1])
                var offset = 2 + topicLength
                let id = qos > 0 ? [body[offset], body[offset + 1]] : []
                offset += id.count
                if level == 5 {
                    var length = 0
                    var shift = 0
                    while true {
                        let byte = body[offset]
                        offset += 1
                        length |= Int(byte & 0x7F) << shift
                        shift += 7
                        if byte & 0x80 == 0 { break }
                    }
                    offset += length
                }
                publishes.withLock { $0.append(Array(body[offset...])) }
                guard qos == 1 else { break }
                guard acknowledged < behaviour.acknowledgedPublishes else {
                    closeGracefully(connection)
                    return
                }
                acknowledged += 1
                send(connection, [0x40, 0x02] + id)
            case 12:  // PINGREQ
                send(connection, [0xD0, 0x00])
            case 14:  // DISCONNECT
                return
            default:
                break
            }
        }
    }

    /// Closes the connection the way a broker that drops a client does, without losing what it already sent: a
    /// socket closed with unread input sends a reset, and a reset discards the acknowledgements still waiting in
    /// the client's receive queue (the client then saw acknowledged messages fail, whenever it read after the
    /// reset). So: end the sending side, read and drop until the client closes (at most 5 s), then close.
    private static func closeGracefully(_ connection: Int32) {
        shutdown(connection, Int32(SHUT_WR))
        var limit = timeval(tv_sec: 5, tv_usec: 0)
        _ = setsockopt(connection, SOL_SOCKET, SO_RCVTIMEO, &limit, socklen_t(MemoryLayout<timeval>.size))
        var sink = [UInt8](repeating: 0, count: 4_096)
        while read(connection, &sink, sink.count) > 0 {}
    }

    private static func send(_ connection: Int32, _ bytes: [UInt8]) {
        _ = bytes.withUnsafeBytes { write(connection, $0.baseAddress, $0.count) }
    }

    private static func readPacket(_ connection: Int32) -> (UInt8, [UInt8])? {
        guard let type = readBytes(connection, 1)?.first else { return nil }
        var length = 0
        var shift = 0
        while true {
            guard let byte = readBytes(connection, 1)?.first else { return nil }
            length |= Int(byte & 0x7F) << shift
            shift += 7
            if byte & 0x80 == 0 { break }
        }
        guard let body = readBytes(connection, length) else { return nil }
        return (type, body)
    }

    private static func readBytes(_ connection: Int32, _ count: Int) -> [UInt8]? {
        var bytes = [UInt8](repeating: 0, count: count)
        var done = 0
        while done < count {
            let got = bytes.withUnsafeMutableBytes { read(connection, $0.baseAddress! + done, count - done) }
            if got < 0, errno == EINTR { continue }
            guard got > 0 else { return nil }
            done += got
        }
        return bytes
    }
}
