import DBus
import KeepAlive

/// How long a device's link was up, from BlueZ's own `Connected` changes: each instant is read as the cache
/// applies the change (the signal, or a `Get` that stood in for one), so a link's time is bluetoothd's
/// true → false as this bus delivered them, not when the transport's calls were made or answered.
///
/// Kept only for the devices the transport connects, beside the tree: 16 bytes each, keyed by the tree's own
/// path string when the device is known. A change for any other device costs one dictionary test.
struct LinkClock: Sendable, Equatable {
    /// When `Connected` last went true, in nanoseconds on the cache's clock, while it is true; ``down`` while it
    /// is false.
    private var upSince: Int64
    /// Nanoseconds the link was up before `upSince`, since the clock was started.
    private var total: Int64 = 0

    private static let down = Int64.min

    /// A clock started at `now`: a link already up counts from here.
    init(connected: Bool, at now: KeepAliveInstant) {
        upSince = connected ? Self.nanoseconds(now) : Self.down
    }

    /// `Connected` is `connected` as of `now`; a repeated value changes nothing.
    mutating func note(connected: Bool, at now: KeepAliveInstant) {
        if connected {
            if upSince == Self.down { upSince = Self.nanoseconds(now) }
        } else if upSince != Self.down {
            total += max(0, Self.nanoseconds(now) - upSince)
            upSince = Self.down
        }
    }

    /// The time up, once the link is down (`.zero` if it never came up); `nil` while it is up.
    var time: Duration? {
        upSince == Self.down ? .nanoseconds(total) : nil
    }

    private static func nanoseconds(_ instant: KeepAliveInstant) -> Int64 {
        let (seconds, attoseconds) = instant.offset.components
        return seconds &* 1_000_000_000 &+ attoseconds / 1_000_000_000
    }
}

extension BlueZObjectCache {
    /// Starts timing `device`'s link afresh (the transport's connect, before its `Connect`): the link time of
    /// the last connection is forgotten, and a link already up counts from now.
    func startLinkClock(_ device: ObjectPath) {
        state.withLock { state in
            let connected = state.devices[device]?.flag(.connected) == true
            let clock = LinkClock(connected: connected, at: time.now)
            if let index = state.links.index(forKey: device) {
                state.links.values[index] = clock
            } else {
                // The tree's own key when the device is known: no second copy of its path is kept.
                let key = state.devices.index(forKey: device).map { state.devices.keys[$0] } ?? device
                state.links[key] = clock
            }
        }
    }

    /// How long `device`'s link was up since ``startLinkClock(_:)``, once it is down; `nil` while it is up or
    /// when it was never started.
    func linkTime(_ device: ObjectPath) -> Duration? {
        state.withLock { $0.links[device]?.time }
    }
}

extension BlueZObjectCache.State {
    /// `device`'s `Connected` is now `connected`: noted on its link clock, if it has one (`now` is read only
    /// then).
    mutating func noteLink(of device: ObjectPath, connected: Bool, at now: () -> KeepAliveInstant) {
        guard !links.isEmpty, let index = links.index(forKey: device) else { return }
        links.values[index].note(connected: connected, at: now())
    }
}
