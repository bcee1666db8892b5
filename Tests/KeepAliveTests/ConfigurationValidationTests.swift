import KeepAlive
import Polling
import KeepAliveTesting
import Synchronization
import Testing

/// Every value that used to stop the process with a `precondition` now throws a ``ConfigurationValueError``
/// naming its field: a configuration is a user's data even when it is built in code.
@Suite("Configuration values built in code")
struct ConfigurationValidationTests {
    let clock = TestClock()

    func schedulerError(_ configuration: KeepAlive.Configuration) -> ConfigurationValueError? {
        do {
            _ = try KeepAlive(configuration: configuration, clock: clock, logger: quietLogger)
            return nil
        } catch {
            return error
        }
    }

    @Test(arguments: [
        (KeepAlive.Configuration(interval: .zero), "KeepAlive.Configuration.interval"),
        (KeepAlive.Configuration(interval: .seconds(-30)), "KeepAlive.Configuration.interval"),
        (KeepAlive.Configuration(jitter: .seconds(-1)), "KeepAlive.Configuration.jitter"),
        (KeepAlive.Configuration(interval: .seconds(10), jitter: .seconds(10)), "KeepAlive.Configuration.jitter"),
        (
            KeepAlive.Configuration(maxFailureBackoffMultiplier: 0),
            "KeepAlive.Configuration.maxFailureBackoffMultiplier"
        ),
        (KeepAlive.Configuration(windowBudget: .zero), "KeepAlive.Configuration.windowBudget"),
        (
            KeepAlive.Configuration(interval: .seconds(30), windowBudget: .seconds(30)),
            "KeepAlive.Configuration.windowBudget"
        ),
        (
            KeepAlive.Configuration(interval: .seconds(30), windowBudget: .seconds(31)),
            "KeepAlive.Configuration.windowBudget"
        ),
        (
            KeepAlive.Configuration(lowPower: LowPowerPolicy(lowPowerMultiplier: 0.5)),
            "KeepAlive.Configuration.lowPower.lowPowerMultiplier"
        ),
        (
            KeepAlive.Configuration(lowPower: LowPowerPolicy(lowPowerMultiplier: .nan)),
            "KeepAlive.Configuration.lowPower.lowPowerMultiplier"
        ),
        (
            KeepAlive.Configuration(lowPower: LowPowerPolicy(critical: .stretch(0.9))),
            "KeepAlive.Configuration.lowPower.critical"
        ),
        (
            KeepAlive.Configuration(ledger: .init(gracePeriod: .seconds(-1))),
            "KeepAlive.Configuration.ledger.gracePeriod"
        ),
        (
            KeepAlive.Configuration(ledger: .init(warningLead: .seconds(-1))),
            "KeepAlive.Configuration.ledger.warningLead"
        ),
        (KeepAlive.Configuration(ledger: .init(historyCapacity: 0)), "KeepAlive.Configuration.ledger.historyCapacity"),
    ])
    func aSchedulerConfigurationThatCannotWorkThrowsNamingItsField(
        configuration: KeepAlive.Configuration, field: String
    ) {
        let error = schedulerError(configuration)
        #expect(error?.field == field, "\(String(describing: error))")
        #expect(error.map { !$0.reason.isEmpty } == true)
    }

    @Test func theDefaultsAndABudgetJustUnderTheIntervalAreAccepted() throws {
        _ = try KeepAlive(configuration: .init(), clock: clock, logger: quietLogger)
        _ = try KeepAlive(
            configuration: .init(interval: .seconds(30), windowBudget: .seconds(29)), clock: clock, logger: quietLogger)
        #expect(throws: Never.self) { try KeepAlive.Configuration().validate() }
    }

    @Test(arguments: [
        (KeepAlive.RegistrationOptions(interval: .zero), "KeepAlive.RegistrationOptions.interval"),
        (KeepAlive.RegistrationOptions(budget: .zero), "KeepAlive.RegistrationOptions.budget"),
        (
            KeepAlive.RegistrationOptions(interval: .seconds(5), budget: .seconds(5)),
            "KeepAlive.RegistrationOptions.budget"
        ),
        // No interval of its own: the scheduler's 30 s decides.
        (KeepAlive.RegistrationOptions(budget: .seconds(45)), "KeepAlive.RegistrationOptions.budget"),
    ])
    func aRegistrationThatCannotWorkThrowsAndRegistersNothing(options: KeepAlive.RegistrationOptions, field: String)
        throws
    {
        let keepAlive = try KeepAlive(clock: clock, logger: quietLogger)
        #expect {
            try keepAlive.register(name: "sensor", options: options) { _ in .noData }
        } throws: { error in
            (error as? ConfigurationValueError)?.field == field
        }
        #expect(keepAlive.registrationCount == 0)
    }

    @Test func aLedgerConfigurationThatCannotWorkThrows() {
        #expect {
            _ = try BackgroundTaskLedger(configuration: .init(historyCapacity: -1), clock: clock, logger: quietLogger)
        } throws: { error in
            (error as? ConfigurationValueError)?.field == "BackgroundTaskLedger.Configuration.historyCapacity"
        }
    }

    @Test func aWindowWithoutBudgetBeginsExpiredInsteadOfTrapping() async throws {
        let ledger = try BackgroundTaskLedger(clock: clock, logger: quietLogger)
        let expired = Atomic(0)
        let id = ledger.begin(name: "no-time", budget: .zero) { expired.add(1, ordering: .relaxed) }
        // The least budget there is: one nanosecond.
        clock.advance(by: .nanoseconds(1))
        ledger.processDueTimers()
        // The ledger's own driver wakes at the same advance and may take the expiry first; it then runs the
        // handler on its task, a moment after this one's `processDueTimers` found nothing left to do (a serial
        // run of the suite saw 0 here).
        try await waitUntil("the expiration handler ran") { expired.load(ordering: .relaxed) >= 1 }
        #expect(expired.load(ordering: .relaxed) == 1)
        #expect(ledger.timeRemaining(id) == .zero)
        ledger.end(id)
        #expect(ledger.history(named: "no-time").first?.outcome == .expired)
    }

    func engineError(
        _ peripherals: [PeripheralSpec],
        _ configuration: PollEngine.Configuration = .init(),
        keepAlive: KeepAlive
    ) -> ConfigurationValueError? {
        do {
            _ = try PollEngine(
                peripherals: peripherals, transport: MockTransport(clock: clock), keepAlive: keepAlive,
                configuration: configuration,
                logger: quietLogger
            )
            return nil
        } catch {
            return error
        }
    }

    @Test func aPollEngineThatCannotWorkThrowsNamingItsField() throws {
        let keepAlive = try KeepAlive(clock: clock, logger: quietLogger)
        let battery = BluetoothUUID(assigned: 0x2A19)
        func spec(_ name: String, _ address: String, interval: Duration? = nil, budget: Duration? = nil)
            -> PeripheralSpec
        {
            PeripheralSpec(
                name: name, peripheral: Peripheral(address: address, adapter: "hci0"), interval: interval,
                budget: budget, reads: [battery]
            )
        }
        let one = spec("cold-room", "AA:BB:CC:00:00:01")
        let duplicate = engineError(
            [one, spec("greenhouse", "AA:BB:CC:00:00:02"), spec("cold-room", "AA:BB:CC:00:00:03")], keepAlive: keepAlive
        )
        #expect(duplicate?.field == "PollEngine.peripherals[2].name")
        #expect(duplicate?.reason.contains("peripherals[0]") == true)
        #expect(
            engineError([one], .init(maxConnections: 0), keepAlive: keepAlive)?.field
                == "PollEngine.Configuration.maxConnections")
        #expect(
            engineError([one], .init(connectTimeout: .zero), keepAlive: keepAlive)?.field
                == "PollEngine.Configuration.connectTimeout")
        #expect(
            engineError([one], .init(disconnectTimeout: .zero), keepAlive: keepAlive)?.field
                == "PollEngine.Configuration.disconnectTimeout")
        #expect(
            engineError([one], .init(retry: RetryPolicy(delays: [])), keepAlive: keepAlive)?.field
                == "PollEngine.Configuration.retry.delays")
        #expect(
            engineError([one], .init(retry: RetryPolicy(delays: [.seconds(1), .zero])), keepAlive: keepAlive)?.field
                == "PollEngine.Configuration.retry.delays[1]"
        )
        #expect(
            engineError([one], .init(retry: RetryPolicy(maxAttempts: 0)), keepAlive: keepAlive)?.field
                == "PollEngine.Configuration.retry.maxAttempts")
        let slow = spec("slow", "AA:BB:CC:00:00:04", interval: .seconds(10), budget: .seconds(12))
        #expect(engineError([slow], keepAlive: keepAlive)?.field == "KeepAlive.RegistrationOptions.budget")
        #expect(keepAlive.registrationCount == 0, "a refused engine registers nothing")
    }
}
