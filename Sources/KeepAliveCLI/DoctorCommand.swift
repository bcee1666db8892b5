import ArgumentParser
import KeepAliveDaemon

/// `keepalive doctor`: checks the gateway and explains what is wrong.
struct DoctorCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "doctor",
        abstract: "Check the system bus, BlueZ, adapters, rfkill, the kernel's Bluetooth, power and the configuration.",
        discussion:
            """
                Each failed check comes with its fix. Exit status 1 when any check failed, 0 otherwise (warnings \
                included).
                """
    )

    @Option(name: .long, help: ArgumentHelp("Also check this configuration file.", valueName: "path"))
    var config: String?

    @Option(name: .long, help: "The adapter that must be present and powered (default: the configuration's, or any).")
    var adapter: String?

    @Flag(name: .long, help: "One JSON object per check.")
    var json = false

    @OptionGroup var bus: BusOptions

    func validate() throws {
        if let adapter { try validateAdapter(adapter) }
    }

    func run() async throws {
        ignoreBrokenPipes()
        var configuration: Result<DaemonConfiguration, ConfigurationError>?
        if let config {
            do {
                configuration = .success(try ConfigurationLoader.load(path: config))
            } catch {
                configuration = .failure(error)
            }
        }
        let doctor = Doctor(options: .init(bus: bus.resolved, configuration: configuration, adapter: adapter))
        let checks = await doctor.run()
        let colour = standardOutputIsTerminal && !json
        for check in checks {
            if json {
                var line = "{\"check\":\(JSONText.quoted(check.name)),\"status\":\"\(check.status.rawValue)\""
                line += ",\"detail\":\(JSONText.quoted(check.detail))"
                if let fix = check.fix { line += ",\"fix\":\(JSONText.quoted(fix))" }
                writeOut(line + "}\n")
                continue
            }
            let (mark, paint) =
                switch check.status {
                case .ok: ("ok  ", "\u{1B}[32m")
                case .warning: ("warn", "\u{1B}[33m")
                case .failed: ("FAIL", "\u{1B}[31m")
                case .skipped: ("skip", "\u{1B}[2m")
                }
            let status = colour ? "\(paint)\(mark)\u{1B}[0m" : mark
            writeOut("\(status)  \(check.name.padded(16)) \(check.detail)\n")
            if let fix = check.fix { writeOut("      \("".padded(16)) fix: \(fix)\n") }
        }
        if !Doctor.passed(checks) {
            if !json {
                let failed = checks.filter { $0.status == .failed }.count
                writeOut("\n\(failed) check\(failed == 1 ? "" : "s") failed\n")
            }
            throw ExitCode.failure
        }
    }
}
