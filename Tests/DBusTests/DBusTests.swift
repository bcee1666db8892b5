import Testing

/// All suites of this target nest here so that they run one after another: several measure the process
/// (RSS, timing) and every one starts its own dbus-daemon.
@Suite(.serialized) struct DBusTests {}
