import Testing

/// All suites of this target nest here: each starts its own dbus-daemon and simulator.
@Suite(.serialized) struct BlueZSimulatorTests {}
