import Testing

@testable import MQTT

/// libmosquitto is loaded with dlopen when the first client is made (Sources/MQTT/LibMosquitto.swift): what a
/// gateway without it, or with a library that is not libmosquitto 2.0, is told.
@Suite struct LibraryLoadingTests {
    /// The error of loading `path`, which must fail.
    private func loadingFails(_ path: String) throws -> MQTTError {
        guard case .failure(let error) = LibMosquitto.load(path) else {
            throw LoadingSucceeded(path: path)
        }
        return error
    }

    private struct LoadingSucceeded: Error {
        let path: String
    }

    @Test func aMissingLibraryIsNamedWithThePackageThatProvidesIt() throws {
        let error = try loadingFails("libmosquitto-absent.so.9")
        #expect(error.code == .libraryUnavailable)
        #expect(error.call == "dlopen")
        #expect(error.message.contains("libmosquitto-absent.so.9"))
        #expect(error.message.contains("apt install libmosquitto1"))
        #expect(error.libraryText?.contains("libmosquitto-absent.so.9") == true)
    }

    @Test func aLibraryWithoutTheFunctionsSaysWhichOneIsMissing() throws {
        // libdbus is on every machine that runs these tests, and has none of mosquitto's functions.
        let error = try loadingFails("libdbus-1.so.3")
        #expect(error.code == .libraryUnavailable)
        #expect(error.call == "dlsym")
        #expect(error.message == "libdbus-1.so.3 has no mosquitto_strerror (libmosquitto 2.0 or later is needed)")
    }

    @Test func theInstalledLibraryLoadsAndAnswers() throws {
        let library = try LibMosquitto.shared.get()
        #expect(libmosquitto_strerror(0) == "No error.")
        #expect(libmosquitto_connack_string(5) == "Connection Refused: not authorised.")
        #expect(library.strerror(14).map { String(cString: $0) } == libmosquitto_strerror(14))
    }
}
