import LocalServices
import TestHarness
import Testing

#if canImport(Glibc)
import Glibc
#endif

extension DBusTests {
    @Suite struct SubprocessSignals {
        /// A spawned dbus-daemon must stop on SIGTERM even when we ignore SIGTERM ourselves and spawn from a thread
        /// that blocks signals: children start with an empty mask and every signal at its default action.
        @Test func childrenStartWithNoSignalBlockedOrIgnored() async throws {
            let previous = signal(SIGTERM, SIG_IGN)
            defer { signal(SIGTERM, previous) }
            let output = try await Subprocess.run(["/bin/sh", "-c", "grep -E '^(SigBlk|SigIgn):' /proc/self/status"])
            #expect(output.status == 0)
            let masks = output.standardOutput.split(separator: "\n").map { line in
                (String(line.prefix { $0 != ":" }), UInt64(line.split(separator: "\t").last ?? "", radix: 16) ?? .max)
            }
            #expect(masks.count == 2, "\(output.standardOutput)")
            for (name, mask) in masks {
                // Signals 1–31 (bits 0–30); above them glibc keeps its own internal real-time signals.
                #expect(mask & 0x7FFF_FFFF == 0, "\(name): \(String(mask, radix: 16))")
            }
        }
    }
}
