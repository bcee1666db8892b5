import ArgumentParser
import KeepAliveDaemon

/// `keepalive`: the BLE keep-alive bridge.
@main
struct KeepAliveCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "keepalive",
        abstract: "Keeps BLE sensors polled from a Linux gateway, through BlueZ.",
        discussion: """
            Every device in the configuration is polled on its own grid (default every 30 s) inside a bounded \
            background window: connect, write, read, listen for notifications, disconnect. One JSON line per \
            device per tick says what happened, including the ticks that were skipped and why.

            Start with `keepalive demo` (no hardware needed) and `keepalive doctor`.
            """,
        version: versionWithExecutors,
        subcommands: [
            RunCommand.self, ScanCommand.self, ReadCommand.self, ProfilesCommand.self, FleetCommand.self,
            DoctorCommand.self, StatusCommand.self, ExplainCommand.self, PollCommand.self, IntervalCommand.self,
            PauseCommand.self, ResumeCommand.self, SimulateCommand.self,
            DemoCommand.self,
        ]
    )
}
