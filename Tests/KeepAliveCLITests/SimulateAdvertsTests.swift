import BlueZSimulator
import LocalServices
import TestHarness
import Testing

#if canImport(Glibc)
    import Glibc
#endif

@Suite("keepalive simulate --adverts")
struct SimulateAdvertsTests {
    @Test func advertsPrintsEverySensorsNameAddressFormatAndKeyBeforeReady() async throws {
        let simulate = try CommandProcess(["simulate", "--private", "--devices", "0", "--adverts"])
        defer { simulate.terminate() }
        try await waitUntil("simulate is ready", timeout: .seconds(20)) { simulate.standardOutput.contains("READY\n") }
        let lines = simulate.standardOutput.split(separator: "\n").map(String.init)
        let ready = try #require(lines.firstIndex(of: "READY"))
        for device in [SimulatedDevice].advertisingSensors() {
            let advertisement = try #require(device.advertisement)
            let line = try #require(lines.firstIndex { $0.contains(device.address) }, "\(device.address) not printed")
            #expect(line < ready)
            #expect(lines[line].contains(device.name ?? "?"))
            #expect(lines[line].contains(" \(advertisement.kind.rawValue) "))
            #expect(lines[line].contains(advertisement.kind.formatName))
            if let key = advertisement.keyHex { #expect(lines[line].hasSuffix("key " + key)) }
        }
        #expect(simulate.standardOutput.contains("key " + SimulatedDevice.AdvertiserKey.bthomeEncrypted))
        #expect(simulate.standardOutput.contains("key " + SimulatedDevice.AdvertiserKey.mibeacon))
        simulate.signal(SIGTERM)
        #expect(try await simulate.waitForExit(within: .seconds(10)) == 0)
    }
}
