import Foundation
import Testing
@testable import DBus
import LocalServices
import TestHarness

#if canImport(Glibc)
    import Glibc
#endif

extension DBusTests {
    @Suite struct FileDescriptors {
        // MARK: The owner type

        @Test func aDescriptorOwnsACloseOnExecDuplicateAndClosesItExactlyOnce() async throws {
            let pipe = try Descriptors.pipe()
            let raw = try #require(pipe.read.rawValue)
            // Checked on the descriptor itself, not by counting the process's: other suites (MQTT clients,
            // brokers, buses) open and close descriptors meanwhile.
            func refersToThePipe(_ descriptor: Int32) -> Bool {
                var mine = stat()
                var pipeEnd = stat()
                return fstat(descriptor, &mine) == 0 && fstat(raw, &pipeEnd) == 0
                    && mine.st_ino == pipeEnd.st_ino && mine.st_dev == pipeEnd.st_dev
            }
            let copy = try UnixFileDescriptor(duplicating: raw)
            let copyRaw = try #require(copy.rawValue)
            #expect(refersToThePipe(copyRaw))
            #expect(copyRaw != raw)
            #expect(fcntl(copyRaw, F_GETFD) & FD_CLOEXEC != 0)
            #expect(Descriptors.sameFile(copy, pipe.read))
            #expect(copy.description == "UnixFileDescriptor(\(copyRaw))")

            // Equality is identity: another owner of the same pipe is another descriptor.
            #expect(copy == copy)
            #expect(copy != pipe.read)
            #expect(Set([copy, copy, pipe.read]).count == 2)
            #expect(DBusValue.unixFileDescriptor(copy) == .unixFileDescriptor(copy))
            #expect(DBusValue.unixFileDescriptor(copy) != .unixFileDescriptor(pipe.read))

            await withTaskGroup(of: Void.self) { group in
                for _ in 0..<16 { group.addTask { copy.close() } }
            }
            copy.close()
            #expect(copy.rawValue == nil)
            #expect(copy.description == "UnixFileDescriptor(closed)")
            #expect(DBusValue.unixFileDescriptor(copy).description == "unixFileDescriptor(closed)")
            // Closed: the number is free, or already reused by another suite for another file.
            #expect(!refersToThePipe(copyRaw))
            // The original is untouched.
            #expect(try Descriptors.read(pipe.read) == .empty)

            let error = #expect(throws: DBusError.self) { try UnixFileDescriptor(duplicating: -1) }
            #expect(error?.code == .invalidArgument)
        }

        @Test func descriptorsHaveSignatureHAndDecodeWithoutADuplicate() throws {
            let pipe = try Descriptors.pipe()
            let value = DBusValue.unixFileDescriptor(pipe.read)
            #expect(value.signature == "h")
            #expect(value.unixFileDescriptor === pipe.read)
            #expect(DBusValue.string("h").unixFileDescriptor == nil)
            #expect(DBusValue.structure([value, .array(element: "h", []), .variant(value)]).signature == "(hahv)")

            // Copies of the pipe, not the process's count: other suites open and close descriptors meanwhile.
            let pipeRaw = try #require(pipe.read.rawValue)
            let before = Descriptors.count(sharingFileWith: pipeRaw)
            #expect(try value.decode(UnixFileDescriptor.self) === pipe.read)
            #expect(try DBusValue.variant(value).decode(DBusValue.self) == value)
            let array = DBusValue.array(element: "h", [value, .unixFileDescriptor(pipe.write)])
            #expect(try array.decode([UnixFileDescriptor].self) == [pipe.read, pipe.write])
            let dictionary = DBusValue.dictionary(key: "s", value: "h", [.init(key: .string("r"), value: value)])
            #expect(try dictionary.decode([String: UnixFileDescriptor].self) == ["r": pipe.read])
            #expect(Descriptors.count(sharingFileWith: pipeRaw) == before)

            let error = #expect(throws: DBusError.self) { try DBusValue.uint32(3).decode(UnixFileDescriptor.self) }
            #expect(error?.code == .typeMismatch)
            #expect(error?.message.contains("expected signature 'h'") == true)
        }

        // MARK: Over the bus

        @Test func aPipeHandedOutByAServiceIsTheSamePipeForTheClient() async throws {
            try await PrivateBus.with { bus in
                let pipe = try Descriptors.pipe()
                let service = try await FileService.start(on: try await bus.connect(), handing: pipe.read)
                let client = try await bus.connect()
                let reply = try await service.call(client, "Get")
                let received = try reply.decode(UnixFileDescriptor.self)
                #expect(reply.first?.unixFileDescriptor === received)
                #expect(received != pipe.read)
                #expect(received.rawValue != pipe.read.rawValue)

                try Descriptors.write("through the bus", to: pipe.write)
                #expect(try Descriptors.read(received) == .data("through the bus"))
                // Sending did not give the service's descriptor away.
                #expect(pipe.read.rawValue != nil)
                try Descriptors.write("again", to: pipe.write)
                #expect(try Descriptors.read(pipe.read) == .data("again"))
            }
        }

        @Test func descriptorsNestedInStructsArraysVariantsAndDictionariesRoundTrip() async throws {
            try await PrivateBus.with { bus in
                _ = try await EchoService.start(on: bus)
                let client = try await bus.connect()
                let a = try Descriptors.pipe()
                let b = try Descriptors.pipe()
                let sent: [DBusValue] = [
                    .structure([.string("a"), .unixFileDescriptor(a.read), .uint32(1)]),
                    .array(element: "h", [.unixFileDescriptor(a.read), .unixFileDescriptor(b.read)]),
                    .variant(.unixFileDescriptor(b.read)),
                    .variant(.variant(.structure([.unixFileDescriptor(a.read)]))),
                    .dictionary(key: "s", value: "h", [.init(key: .string("b"), value: .unixFileDescriptor(b.read))]),
                    .dictionary(
                        key: "h", value: "v",
                        [
                            .init(key: .unixFileDescriptor(a.read), value: .variant(.unixFileDescriptor(b.read)))
                        ]),
                    .array(element: "h", []),
                    .array(element: "(sh)", [.structure([.string("x"), .unixFileDescriptor(a.read)])]),
                ]
                let reply = try await EchoService.call(client, "Echo", sent)
                #expect(reply.signature == sent.signature)
                let sentDescriptors = sent.flatMap(Self.descriptors)
                let receivedDescriptors = reply.flatMap(Self.descriptors)
                #expect(sentDescriptors.count == 9)
                #expect(receivedDescriptors.count == sentDescriptors.count)
                // Every received descriptor is an owner of its own, of the very pipe end that was sent.
                #expect(Set(receivedDescriptors).count == receivedDescriptors.count)
                for (original, received) in zip(sentDescriptors, receivedDescriptors) {
                    #expect(original != received)
                    #expect(Descriptors.sameFile(original, received))
                }
                #expect(reply != sent)

                let fromStruct = try #require(reply[0].structure?[1].unixFileDescriptor)
                try Descriptors.write("A", to: a.write)
                #expect(try Descriptors.read(fromStruct) == .data("A"))
                let fromArray = try reply[1].decode([UnixFileDescriptor].self)
                try Descriptors.write("B", to: b.write)
                #expect(try Descriptors.read(fromArray[1]) == .data("B"))
                let fromDictionary = try reply[4].decode([String: UnixFileDescriptor].self)
                try Descriptors.write("B2", to: b.write)
                #expect(try fromDictionary["b"].map(Descriptors.read) == .data("B2"))
            }
        }

        @Test func aSignalCarriesADescriptor() async throws {
            try await PrivateBus.with { bus in
                let service = try await bus.connect()
                let client = try await bus.connect()
                let stream = try await client.signals(
                    matching: MatchRule(interface: "org.example.Files", member: "Opened"))
                let pipe = try Descriptors.pipe()
                try await service.emitSignal(
                    path: "/org/example/Files", interface: "org.example.Files", member: "Opened",
                    arguments: [.string("pipe"), .unixFileDescriptor(pipe.read)])
                let signals = try await collect(stream) { _ in true }
                let (name, received) = try #require(signals.first).arguments.decode(
                    String.self, UnixFileDescriptor.self)
                #expect(name == "pipe")
                try Descriptors.write("signalled", to: pipe.write)
                #expect(try Descriptors.read(received) == .data("signalled"))
            }
        }

        @Test func theWriterSideEndsOnlyWhenEveryCopyIsClosed() async throws {
            try await PrivateBus.with { bus in
                let client = try await bus.connect()

                // The receiver closes first: the service's copy still keeps the pipe open.
                let first = try Descriptors.pipe()
                let firstService = try await FileService.start(on: try await bus.connect(), handing: first.write)
                let firstReceived = try await firstService.call(client, "Get").decode(UnixFileDescriptor.self)
                try Descriptors.write("x", to: firstReceived)
                #expect(try Descriptors.read(first.read) == .data("x"))
                firstReceived.close()
                firstReceived.close()
                #expect(firstReceived.rawValue == nil)
                #expect(try Descriptors.read(first.read) == .empty)
                first.write.close()  // the service's copy (and the test's: one object)
                try await waitUntil("the first pipe's reader sees the end") {
                    try Descriptors.read(first.read) == .endOfFile
                }

                // The sender closes first: the receiver's copy alone keeps the pipe open.
                let second = try Descriptors.pipe()
                let secondService = try await FileService.start(on: try await bus.connect(), handing: second.write)
                let secondReceived = try await secondService.call(client, "Get").decode(UnixFileDescriptor.self)
                second.write.close()
                #expect(try Descriptors.read(second.read) == .empty)
                try Descriptors.write("still open", to: secondReceived)
                #expect(try Descriptors.read(second.read) == .data("still open"))
                secondReceived.close()
                try await waitUntil("the second pipe's reader sees the end") {
                    try Descriptors.read(second.read) == .endOfFile
                }
            }
        }

        @Test func aHundredRoundTripsLeaveNoDescriptorOpen() async throws {
            try await PrivateBus.with { bus in
                _ = try await EchoService.start(on: bus)
                let client = try await bus.connect()
                let pipe = try Descriptors.pipe()
                let before = Descriptors.openCount()
                // A warm-up round first: whatever it opens must be closed again too.
                _ = try await EchoService.call(client, "Echo", [.unixFileDescriptor(pipe.write)])
                try await waitUntil("the warm-up's descriptors are closed") { Descriptors.openCount() <= before }
                var peak = before
                for round in 0..<100 {
                    let reply = try await EchoService.call(
                        client, "Echo", [.string("round \(round)"), .unixFileDescriptor(pipe.write)])
                    let (_, received) = try reply.decode(String.self, UnixFileDescriptor.self)
                    #expect(Descriptors.sameFile(received, pipe.write))
                    if round.isMultiple(of: 2) { received.close() }  // the others close when released
                    peak = max(peak, Descriptors.openCount())
                }
                try await waitUntil("every descriptor of the round trips is closed") {
                    Descriptors.openCount() <= before
                }
                // The counts are the whole process's, and other suites open and close descriptors meanwhile (a count
                // read again after the wait can hold one of theirs): they show that the hundred copies never piled
                // up; the pipe below shows that none is left.
                #expect(peak - before < 50, "open descriptors: before \(before), peak \(peak)")
                // The strongest check: no copy of the write end is left anywhere in the process (client, service,
                // libdbus's messages), so closing ours ends the pipe.
                pipe.write.close()
                try await waitUntil("the reader sees the end") { try Descriptors.read(pipe.read) == .endOfFile }
            }
        }

        // MARK: Refusals and failures

        @Test func aTCPConnectionRefusesToSendADescriptorWithAClearError() async throws {
            try await PrivateBus.with(tcp: true) { bus in
                _ = try await EchoService.start(on: bus)
                let client = try await bus.connectOverTCP()
                let pipe = try Descriptors.pipe()
                let error = await #expect(throws: DBusError.self) {
                    _ = try await EchoService.call(client, "Echo", [.structure([.unixFileDescriptor(pipe.read)])])
                }
                #expect(error?.code == .unsupportedType)
                #expect(error?.message.contains("cannot pass Unix file descriptors (type 'h')") == true)
                #expect(error?.message.contains("tcp:host=127.0.0.1") == true)
                let signalError = await #expect(throws: DBusError.self) {
                    try await client.emitSignal(
                        path: "/", interface: "org.example.Files", member: "Opened",
                        arguments: [.unixFileDescriptor(pipe.read)])
                }
                #expect(signalError?.code == .unsupportedType)
                // Nothing was sent, and the connection goes on working.
                #expect(await client.state == .open)
                #expect(try await EchoService.call(client, "Echo", [.uint32(1)]) == [.uint32(1)])

                // A service on TCP cannot answer with one: its caller gets an error instead of waiting.
                let tcpService = try await FileService.start(on: try await bus.connectOverTCP(), handing: pipe.read)
                let replyError = await #expect(throws: DBusError.self) {
                    _ = try await tcpService.call(try await bus.connect(), "Get")
                }
                #expect(replyError?.name == DBusError.StandardName.failed)
                #expect(replyError?.message.contains("cannot pass Unix file descriptors") == true)
            }
        }

        @Test func aClosedDescriptorIsRefusedBeforeAnythingIsSent() async throws {
            try await PrivateBus.with { bus in
                _ = try await EchoService.start(on: bus)
                let client = try await bus.connect()
                let pipe = try Descriptors.pipe()
                pipe.read.close()
                let error = await #expect(throws: DBusError.self) {
                    _ = try await EchoService.call(client, "Echo", [.variant(.unixFileDescriptor(pipe.read))])
                }
                #expect(error?.code == .invalidArgument)
                #expect(error?.message.contains("closed") == true)
            }
        }

        @Test func aWrongTypeAfterADescriptorStillClosesTheDescriptor() throws {
            let pipe = try Descriptors.pipe()
            do {
                let message = try DBusMessage.methodCall(destination: nil, path: "/", interface: nil, member: "TakeTwo")
                try message.appendArguments([.unixFileDescriptor(pipe.write), .string("not a u")])
                pipe.write.close()  // the message holds a duplicate of its own
                #expect(try Descriptors.read(pipe.read) == .empty)
                let arguments = try message.arguments()
                let error = #expect(throws: DBusError.self) {
                    try arguments.decode(UnixFileDescriptor.self, UInt32.self)
                }
                #expect(error?.code == .typeMismatch)
                #expect(error?.message.contains("'hu'") == true)
            }
            // The decoded descriptor and the message's are gone with them: nothing holds the write end any more.
            #expect(try Descriptors.read(pipe.read) == .endOfFile)
        }

        @Test func aServiceThatRejectsTheArgumentsAfterADescriptorClosesIt() async throws {
            try await PrivateBus.with { bus in
                let unused = try Descriptors.pipe()
                let service = try await FileService.start(on: try await bus.connect(), handing: unused.read)
                let client = try await bus.connect()
                let pipe = try Descriptors.pipe()
                let error = await #expect(throws: DBusError.self) {
                    _ = try await service.call(client, "TakeTwo", [.unixFileDescriptor(pipe.write), .string("x")])
                }
                #expect(error?.name == DBusError.StandardName.invalidArgs)
                pipe.write.close()
                try await waitUntil("the service's copy is closed") {
                    try Descriptors.read(pipe.read) == .endOfFile
                }
            }
        }

        static let childVariable = "DBUS_DESCRIPTOR_LIMIT_CHILD"

        /// The case below lowers the process's descriptor limit and fills every free descriptor number: run in
        /// this process, any other test opening a file meanwhile failed with EMFILE (seen on a loaded machine). It
        /// runs in a child of its own.
        @Test func aDescriptorReadBeforeDecodingFailsHalfwayIsClosed() async throws {
            let child = try childTestProcess(
                running: "decodingFailsHalfwayUnderALoweredLimit", with: Self.childVariable, "1")
            defer { child.kill(SIGKILL) }
            try await waitUntil("the child is done", timeout: .seconds(60)) { child.exitStatus != nil }
            #expect(child.exitStatus == 0, "\(child.output.suffix(3_000))")
            #expect(
                child.output.contains("decodingFailsHalfwayUnderALoweredLimit() passed"),
                "\(child.output.suffix(3_000))")
        }

        @Test(.enabled(if: ProcessInfo.processInfo.environment[FileDescriptors.childVariable] != nil))
        func decodingFailsHalfwayUnderALoweredLimit() throws {
            let pipe = try Descriptors.pipe()
            let message = try DBusMessage.methodCall(destination: nil, path: "/", interface: nil, member: "Two")
            try message.appendArguments([.unixFileDescriptor(pipe.write), .unixFileDescriptor(pipe.write)])
            pipe.write.close()
            // The pipe's descriptors (its read end and the message's two copies of the write end), not the
            // process's: other suites open and close theirs meanwhile.
            let before = Descriptors.count(sharingFileWith: try #require(pipe.read.rawValue))

            // Leave exactly one descriptor number free under a lowered limit: libdbus's duplicate of the first
            // 'h' takes it, the second fails with EMFILE, and reading the message throws halfway.
            var original = rlimit()
            try #require(getrlimit(Self.fileLimit, &original) == 0)
            let filler = open("/dev/null", O_RDONLY | O_CLOEXEC)
            try #require(filler >= 0)
            let highest = Descriptors.highestOpen()
            var fillers: [Int32] = []
            while true {
                let next = fcntl(filler, F_DUPFD_CLOEXEC, 0)
                guard next >= 0, next <= highest else {
                    if next >= 0 { close(next) }
                    break
                }
                fillers.append(next)
            }
            var lowered = original
            lowered.rlim_cur = rlim_t(highest + 2)
            try #require(setrlimit(Self.fileLimit, &lowered) == 0)
            let result = Result { try message.arguments() }
            _ = setrlimit(Self.fileLimit, &original)
            for descriptor in fillers { close(descriptor) }
            close(filler)

            let error = #expect(throws: DBusError.self) { try result.get() }
            #expect(error?.code == .systemCall)
            // The first descriptor was taken out of the message and closed again when reading failed.
            #expect(Descriptors.count(sharingFileWith: try #require(pipe.read.rawValue)) == before)
            #expect(try Descriptors.read(pipe.read) == .empty)  // the message's own copies
        }

        // MARK: Helpers

        static let fileLimit = __rlimit_resource_t(RLIMIT_NOFILE.rawValue)

        /// Every descriptor in `value`, depth first, in wire order.
        static func descriptors(_ value: DBusValue) -> [UnixFileDescriptor] {
            switch value {
            case .unixFileDescriptor(let descriptor): [descriptor]
            case .array(_, let values), .structure(let values): values.flatMap(descriptors)
            case .dictionary(_, _, let entries): entries.flatMap { descriptors($0.key) + descriptors($0.value) }
            case .variant(let inner): descriptors(inner)
            default: []
            }
        }
    }
}
