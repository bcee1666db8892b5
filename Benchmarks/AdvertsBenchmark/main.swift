// Decode cost per advertisement (issue #36): `AdvertisementDecoder` over `LibCryptoAESCCM`, each published vector of
// Benchmarks/advert_vectors.tsv decoded in a loop. Benchmarks/advert_peer.py does the same with the Python decoders
// Home Assistant uses; `Benchmarks/run.py --sections adverts` runs both and prints them side by side.
//
//     AdvertsBenchmark [--quick] [--vectors PATH] [--iterations N] [--runs R]
//
// Per format: one warm-up run, then R runs of N decodes; each run's thread CPU time (CLOCK_THREAD_CPUTIME_ID, ns)
// ÷ N. Prints one line per format, the median of the runs first:
//
//     advert name=bthome_encrypted ns=812.3 min=790.1 max=840.2 runs=7 iterations=200000 readings=2 repeat=1
//
// What one decode is, as the daemon does it for an advertisement BlueZ reports: the bytes (an `[UInt8]`, made once,
// as BlueZ's ServiceData value is), the source, the address and the key (parsed once, as the configuration is) go
// to `decode`, which returns an `AdvertisementPayload` with its `Reading`s. Every result is checked (a decode that
// throws ends the benchmark with status 1) and its readings are counted, so nothing is optimised away.
//
// The replay guard: one per device, kept across the whole run, as the daemon keeps it. The first decode of the
// warm-up records the vector's counter; every later one carries the same counter, which the guard accepts as a
// repeat (`isRepeat`): it is checked before decryption, the tag is verified, and the guard records the counter
// again. So every measured decode pays the guard's check, AES-CCM and the tag, as bthome-ble's does (it accepts an
// equal counter too, and decrypts). xiaomi-ble keeps no counter at all.
#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif
import Basics
import LibCrypto
import Readings

struct Vector {
    var name: String
    var source: AdvertisementSource
    var bytes: [UInt8]
    var address: BluetoothAddress
    var key: AdvertisementKey?
}

struct Failure: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}

func threadCPUNanoseconds() -> UInt64 {
    var now = timespec()
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &now)
    return UInt64(now.tv_sec) &* 1_000_000_000 &+ UInt64(now.tv_nsec)
}

func readFile(_ path: String) throws -> String {
    guard let file = fopen(path, "r") else { throw Failure("cannot open \(path)") }
    defer { fclose(file) }
    var bytes: [UInt8] = []
    var buffer = [UInt8](repeating: 0, count: 4096)
    while true {
        let count = fread(&buffer, 1, buffer.count, file)
        if count <= 0 { break }
        bytes.append(contentsOf: buffer[0..<count])
    }
    return String(decoding: bytes, as: UTF8.self)
}

/// Benchmarks/advert_vectors.tsv: name, source, payload hex, address, key or `-`, origin.
func loadVectors(_ path: String) throws -> [Vector] {
    var vectors: [Vector] = []
    for line in try readFile(path).split(separator: "\n", omittingEmptySubsequences: true) {
        if line.hasPrefix("#") { continue }
        let columns = line.split(separator: "\t", omittingEmptySubsequences: false).map(String.init)
        guard columns.count >= 5 else { throw Failure("\(path): a line with \(columns.count) columns: \(line)") }
        let sourceParts = columns[1].split(separator: ":")
        guard sourceParts.count == 2, let number = UInt16(sourceParts[1], radix: 16) else {
            throw Failure("\(path): source \(columns[1])")
        }
        let source: AdvertisementSource =
            sourceParts[0] == "company"
            ? .manufacturerData(companyID: number) : .serviceData(uuid16: number)
        guard let bytes = Hex.bytes(columns[2]) else { throw Failure("\(path): not hex: \(columns[2])") }
        let key = columns[4] == "-" ? nil : try AdvertisementKey(hex: columns[4])
        vectors.append(
            Vector(
                name: columns[0], source: source, bytes: bytes, address: try BluetoothAddress(parsing: columns[3]),
                key: key))
    }
    return vectors
}

var arguments = Array(CommandLine.arguments.dropFirst())
var quick = false
var vectorsPath = "Benchmarks/advert_vectors.tsv"
var iterations: Int? = nil
var runs: Int? = nil
while !arguments.isEmpty {
    let argument = arguments.removeFirst()
    switch argument {
    case "--quick": quick = true
    case "--vectors" where !arguments.isEmpty: vectorsPath = arguments.removeFirst()
    case "--iterations" where !arguments.isEmpty: iterations = Int(arguments.removeFirst())
    case "--runs" where !arguments.isEmpty: runs = Int(arguments.removeFirst())
    default:
        print("usage: AdvertsBenchmark [--quick] [--vectors PATH] [--iterations N] [--runs R]")
        exit(2)
    }
}
let perRun = iterations ?? (quick ? 20_000 : 200_000)
let runCount = runs ?? (quick ? 3 : 7)

let decoder = AdvertisementDecoder(cipher: LibCryptoAESCCM())

/// Decodes `vector` `count` times with `replay`; the readings decoded, in all.
@inline(never)
func decodeLoop(_ vector: Vector, count: Int, replay: inout ReplayGuard) throws -> (readings: Int, repeats: Int) {
    var readings = 0
    var repeats = 0
    for _ in 0..<count {
        let payload = try decoder.decode(
            vector.bytes, from: vector.source, address: vector.address, key: vector.key, replayGuard: &replay)
        readings &+= payload.readings.count
        repeats &+= payload.isRepeat ? 1 : 0
    }
    return (readings, repeats)
}

do {
    let vectors = try loadVectors(vectorsPath)
    for vector in vectors {
        var replay = ReplayGuard()
        // Warm-up: loads libcrypto (once per process), fills the caches, records the counter.
        let first = try decoder.decode(
            vector.bytes, from: vector.source, address: vector.address, key: vector.key, replayGuard: &replay)
        _ = try decodeLoop(vector, count: perRun / 10, replay: &replay)
        var perAdvert: [Double] = []
        var readings = 0
        var repeats = 0
        for _ in 0..<runCount {
            let start = threadCPUNanoseconds()
            let counted = try decodeLoop(vector, count: perRun, replay: &replay)
            let elapsed = threadCPUNanoseconds() - start
            readings = counted.readings / perRun
            repeats = counted.repeats / perRun
            perAdvert.append(Double(elapsed) / Double(perRun))
        }
        perAdvert.sort()
        let median = perAdvert[perAdvert.count / 2]
        func text(_ value: Double) -> String {
            let tenths = Int((value * 10).rounded())
            return "\(tenths / 10).\(tenths % 10)"
        }
        let values = first.readings.map { "\($0.name)=\($0.value.map { "\($0)" } ?? "nil")" }.joined(separator: ",")
        print(
            "advert name=\(vector.name) ns=\(text(median)) min=\(text(perAdvert.first!)) max=\(text(perAdvert.last!)) "
                + "runs=\(runCount) iterations=\(perRun) readings=\(readings) repeat=\(repeats) values=\(values)")
    }
} catch {
    print("AdvertsBenchmark: \(error)")
    exit(1)
}
