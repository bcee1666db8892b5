internal import NIOCore
internal import NIOPosix
internal import NIOHTTP1

/// `metrics: listen: HOST:PORT`: `GET /metrics` served over HTTP/1.1 by SwiftNIO (NIOPosix's event loop,
/// NIOHTTP1's parser and pipelining), on one event loop thread of its own.
///
/// The format follows `Accept`: OpenMetrics 1.0 when the scraper names `application/openmetrics-text`, else
/// Prometheus text 0.0.4. Any other path is 404, any other method 405. The loop waits in `epoll_wait` without a
/// timeout: an endpoint nobody scrapes wakes nothing.
final class MetricsEndpoint: Sendable {
    private let group: MultiThreadedEventLoopGroup
    private let channel: any Channel
    /// `HOST:PORT` as bound (the port the kernel chose for port 0).
    let boundAddress: String

    private init(group: MultiThreadedEventLoopGroup, channel: any Channel, boundAddress: String) {
        self.group = group
        self.channel = channel
        self.boundAddress = boundAddress
    }

    /// Binds `host:port` and serves `registry` until ``stop()``.
    ///
    /// - Throws: NIO's error when the address cannot be bound (in use, not this host's).
    static func start(host: String, port: Int, registry: MetricsRegistry) async throws -> MetricsEndpoint {
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        let bootstrap = ServerBootstrap(group: group)
            .serverChannelOption(.backlog, value: 16)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.configureHTTPServerPipeline(withErrorHandling: true)
                    try channel.pipeline.syncOperations.addHandler(MetricsRequestHandler(registry: registry))
                }
            }
        do {
            let channel = try await bootstrap.bind(host: host, port: port).get()
            let bound = channel.localAddress
            let boundPort = bound?.port ?? port
            let shownHost = host.contains(":") ? "[\(host)]" : host
            return MetricsEndpoint(group: group, channel: channel, boundAddress: "\(shownHost):\(boundPort)")
        } catch {
            try? await group.shutdownGracefully()
            throw error
        }
    }

    /// Closes the listening socket and the open connections, and ends the loop's thread.
    func stop() async {
        try? await channel.close()
        try? await group.shutdownGracefully()
    }
}

/// One connection's requests, answered in order (NIOHTTP1's pipelining handler holds the next one back).
private final class MetricsRequestHandler: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias OutboundOut = HTTPServerResponsePart

    private let registry: MetricsRegistry
    private var head: HTTPRequestHead?

    init(registry: MetricsRegistry) {
        self.registry = registry
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head(let head): self.head = head
        case .body: break  // a body is read and ignored: no method here takes one
        case .end:
            guard let head else { return }
            self.head = nil
            respond(to: head, context: context)
        }
    }

    private func respond(to request: HTTPRequestHead, context: ChannelHandlerContext) {
        let path = request.uri.split(separator: "?", maxSplits: 1, omittingEmptySubsequences: false).first ?? ""
        var headers = HTTPHeaders()
        let status: HTTPResponseStatus
        let body: String
        if path != "/metrics" {
            status = .notFound
            body = "only /metrics is served here\n"
            headers.add(name: "Content-Type", value: "text/plain; charset=utf-8")
        } else if request.method != .GET, request.method != .HEAD {
            status = .methodNotAllowed
            body = "only GET and HEAD\n"
            headers.add(name: "Allow", value: "GET, HEAD")
            headers.add(name: "Content-Type", value: "text/plain; charset=utf-8")
        } else {
            let format = MetricsFormat(accept: request.headers.first(name: "Accept"))
            status = .ok
            body = registry.render(format)
            headers.add(name: "Content-Type", value: format.contentType)
        }
        let buffer = context.channel.allocator.buffer(string: body)
        headers.add(name: "Content-Length", value: String(buffer.readableBytes))
        let keepAlive = request.isKeepAlive
        if !keepAlive { headers.add(name: "Connection", value: "close") }
        context.write(
            wrapOutboundOut(.head(HTTPResponseHead(version: request.version, status: status, headers: headers))),
            promise: nil)
        if request.method != .HEAD { context.write(wrapOutboundOut(.body(.byteBuffer(buffer))), promise: nil) }
        let written = context.writeAndFlush(wrapOutboundOut(.end(nil)))
        guard !keepAlive else { return }
        let bound = NIOLoopBound(context, eventLoop: context.eventLoop)
        written.whenComplete { _ in bound.value.close(promise: nil) }
    }
}
