import KeepAlive

/// One thing the daemon decided about a device's tick (or did to its adapter), kept compact: `keepalive explain`
/// turns a run of them into words (``Explanation``). Strings (error codes, gateways, adapters) are interned by the
/// ``DecisionLog`` into small numbers, so an entry costs 48 bytes (a test checks) and no allocation of its own.
struct Decision: Sendable, Hashable {
    enum Kind: UInt8, Sendable {
        /// The poll ran and worked (new data or nothing new).
        case polled
        /// The poll ran and failed with ``Decision/code``.
        case failed
        /// Skipped: backing off after ``Decision/value`` failures, the last one ``Decision/code``, until ``next``.
        case backoff
        /// Skipped: the previous poll of the device was still running.
        case overlap
        /// Skipped: the ledger was closed (shutting down, or the host going to sleep).
        case closed
        /// The window ended while the poll waited for a connection slot (``Decision/value``: the wait, in ms), or
        /// the tick gave up because other work held the device's link (``Decision/code``: what held it).
        case noSlot
        /// Not heard advertising: a passive sensor silent for its interval, or a gated poll that sent no Connect.
        case notHeard
        /// Declined: another gateway of the fleet holds the device (``Decision/holder``).
        case heldElsewhere
        /// Declined: its operator paused the device.
        case paused
        /// A healing step on the device's adapter (``Decision/code``: the action).
        case healing
    }

    struct Flags: OptionSet, Sendable, Hashable {
        let rawValue: UInt8
        /// The poll was asked for by a command (`keepalive poll`, MQTT), not the schedule.
        static let command = Flags(rawValue: 1 << 0)
        /// The poll found new data (``Kind/polled``).
        static let newData = Flags(rawValue: 1 << 1)
        /// The adapter was reported unhealthy when the poll failed.
        static let adapterUnhealthy = Flags(rawValue: 1 << 2)
        /// A passive sensor (its readings are heard, never read).
        static let passive = Flags(rawValue: 1 << 3)
    }

    // Declared widest first: 48 bytes with no padding between fields.

    /// Wall-clock milliseconds since 1970 of the first and the last tick of this run of like decisions.
    var first: Int64
    var last: Int64
    /// For ``Kind/backoff``: when the next try is due (wall-clock milliseconds), 0 when unknown.
    var next: Int64 = 0
    /// The interval in force, in milliseconds (saturated).
    var intervalMilliseconds: UInt32 = 0
    /// What the kind counts: failures in a row (backoff), the slot wait or the window used in milliseconds.
    var value: UInt32 = 0
    /// Like decisions in a row (one entry for 100 good polls).
    var count: UInt32 = 1
    /// An interned string: the failure code, the healing action, or what held the link of a `noSlot` tick.
    var code: UInt16 = 0
    /// An interned string: the gateway holding the device.
    var holder: UInt16 = 0
    /// An interned string: the adapter.
    var adapter: UInt16 = 0
    /// An interned string: how a fleet's device came to this gateway on this poll (`from north-pi, expired`).
    var handover: UInt16 = 0
    var kind: Kind
    var flags: Flags = []
    var power: PowerState = .normal

    init(kind: Kind, at: Int64) {
        self.kind = kind
        self.first = at
        self.last = at
    }

    /// Whether `other` continues this run: the same decision for the same reasons, only later.
    func isLike(_ other: Decision) -> Bool {
        kind == other.kind && flags == other.flags && power == other.power && code == other.code
            && holder == other.holder && adapter == other.adapter && handover == other.handover
            && intervalMilliseconds == other.intervalMilliseconds
            && (kind != .backoff || value == other.value)
    }
}
