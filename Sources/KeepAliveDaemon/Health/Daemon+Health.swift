internal import BlueZ
internal import DBus
internal import KeepAlive
internal import Polling
internal import Basics
internal import Logging

extension Daemon {
    /// The healer for this run, or `nil` with `healing.enabled: false`.
    func makeHealer(specs: [PeripheralSpec], transport: ReconnectingTransport) -> AdapterHealer? {
        guard configuration.healing.enabled else { return nil }
        // A fleet's shared devices report only while this gateway holds them, so a round that waited for them
        // might never end: an adapter is judged by the devices it alone polls (a failing shared device costs its
        // holder placement score instead, and moves).
        let shared = Set(configuration.sharedDevices.map(\.name))
        return AdapterHealer(
            specs: specs.filter { !shared.contains($0.name) }, policy: configuration.healing, transport: transport,
            status: statusBoard,
            notifier: options.notifier, logger: logger, metricsFactory: metricsFactory)
    }
}
