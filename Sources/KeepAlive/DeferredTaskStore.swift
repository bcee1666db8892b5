import Basics

#if canImport(Glibc)
    import Glibc
#endif

/// A pending request as a store keeps it: its earliest begin on the wall clock (the scheduler's clock starts again
/// at each start), and its failures so far (so the backoff and its bound survive a restart).
public struct StoredDeferredTask: Sendable, Hashable {
    /// The request; its ``DeferredTaskRequest/earliestBegin`` is not kept (see ``earliestBeginWall``).
    public var request: DeferredTaskRequest
    /// Since the Unix epoch; `nil`: as soon as the conditions hold.
    public var earliestBeginWall: Duration?
    public var failures: Int

    public init(request: DeferredTaskRequest, earliestBeginWall: Duration?, failures: Int) {
        self.request = request
        self.request.earliestBegin = nil
        self.earliestBeginWall = earliestBeginWall
        self.failures = failures
    }
}

/// Where a ``DeferredTaskScheduler`` keeps its pending requests, so that they survive a restart (iOS keeps them
/// for the app). It saves after each change: a submission, a cancel, a run's end.
public protocol DeferredTaskStore: Sendable {
    func load() throws -> [StoredDeferredTask]
    func save(_ tasks: [StoredDeferredTask]) throws
}

/// Why a store could not be read or written: the path, and where in the file.
public struct DeferredTaskStoreError: Error, Sendable, Hashable, CustomStringConvertible {
    public var path: String
    public var message: String

    public init(path: String, _ message: String) {
        self.path = path
        self.message = message
    }

    public var description: String { "\(path): \(message)" }
}

/// The pending requests as one small JSON file, replaced atomically (a new file, `fsync`, `rename`, the
/// directory's `fsync`): a crash leaves the old list or the new one, never half of one.
///
/// ```json
/// {"version":1,"tasks":[{"identifier":"history.fern","kind":"processing","earliestBegin":1764400000000,
///  "requiresNetwork":true,"requiresExternalPower":true,"budgetMs":600000,"device":"fern","failures":0}]}
/// ```
///
/// `earliestBegin` is in milliseconds since the Unix epoch. A missing file is an empty list.
public struct FileDeferredTaskStore: DeferredTaskStore {
    public let path: String

    public init(path: String) {
        self.path = path
    }

    public func load() throws -> [StoredDeferredTask] {
        let read: [UInt8]?
        do {
            read = try AtomicFile.read(path)
        } catch {
            throw DeferredTaskStoreError(path: path, error.message)
        }
        guard let bytes = read else { return [] }
        do throws(DeferredTaskStoreError) {
            let document: JSONValue
            do {
                document = try JSONParser.parse(bytes, anyNumber: false, maximumBytes: AtomicFile.limit)
            } catch {
                throw DeferredTaskStoreError(path: path, "not JSON (\(Self.position(of: error, in: bytes)))")
            }
            guard document["version"]?.integerValue == 1, case .array(let tasks)? = document["tasks"] else {
                throw DeferredTaskStoreError(path: path, "not a deferred-task list of version 1")
            }
            var decoded: [StoredDeferredTask] = []
            for (index, task) in tasks.enumerated() {
                decoded.append(try decode(task, at: index))
            }
            return decoded
        } catch var error {
            // Kept for a person to read, never overwritten by the next save.
            let aside = path + ".corrupt"
            if rename(path, aside) == 0 { error.message += "; moved aside to \(aside)" }
            throw error
        }
    }

    public func save(_ tasks: [StoredDeferredTask]) throws {
        var document = JSONObject()
        document.integer("version", 1)
        document.array("tasks") { array in
            for task in tasks {
                array.object { object in
                    let request = task.request
                    object.string("identifier", request.identifier)
                    object.string("kind", request.kind.rawValue)
                    if let wall = task.earliestBeginWall {
                        object.integer("earliestBegin", wall.milliseconds)
                    }
                    object.bool("requiresNetwork", request.requiresNetwork)
                    object.bool("requiresExternalPower", request.requiresExternalPower)
                    object.integer("budgetMs", request.budget.milliseconds)
                    if let device = request.device { object.string("device", device) }
                    object.integer("failures", task.failures)
                }
            }
        }
        do {
            try AtomicFile.replace(path, with: document.bytes + [0x0A])
        } catch {
            throw DeferredTaskStoreError(path: error.path, error.message)
        }
    }

    private func decode(_ value: JSONValue, at index: Int) throws(DeferredTaskStoreError) -> StoredDeferredTask {
        func fail(_ message: String) -> DeferredTaskStoreError {
            DeferredTaskStoreError(path: path, "tasks[\(index)]: \(message)")
        }
        guard let identifier = value["identifier"]?.stringValue else { throw fail("no identifier") }
        guard let kind = value["kind"]?.stringValue.flatMap(DeferredTaskRequest.Kind.init(rawValue:)) else {
            throw fail("kind must be refresh or processing")
        }
        guard let budget = value["budgetMs"]?.integerValue else { throw fail("no budgetMs") }
        var request = DeferredTaskRequest(
            identifier: identifier, kind: kind, budget: .milliseconds(budget),
            device: value["device"]?.stringValue)
        if case .bool(let flag)? = value["requiresNetwork"] { request.requiresNetwork = flag }
        if case .bool(let flag)? = value["requiresExternalPower"] { request.requiresExternalPower = flag }
        do {
            try request.validate()
        } catch {
            throw fail(error.description)
        }
        let failures = Int(value["failures"]?.integerValue ?? 0)
        return StoredDeferredTask(
            request: request, earliestBeginWall: value["earliestBegin"]?.integerValue.map { .milliseconds($0) },
            failures: max(0, failures))
    }

    private static func position(of error: any Error, in bytes: [UInt8]) -> String {
        let offset: Int? =
            switch error as? JSONSyntaxError {
            case .tooDeep(let at), .unexpectedByte(_, let at), .integerOutOfRange(let at), .invalidEscape(let at),
                .invalidUTF8(let at), .trailingBytes(let at):
                at
            case .unexpectedEnd: bytes.count
            default: nil
            }
        guard let offset else { return "\(error)" }
        let before = bytes.prefix(offset)
        let line = before.count { $0 == 0x0A } + 1
        let column = offset - (before.lastIndex(of: 0x0A).map { $0 + 1 } ?? 0) + 1
        return "line \(line), column \(column): \(error)"
    }
}
