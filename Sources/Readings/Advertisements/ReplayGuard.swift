/// The replay protection of one device's encrypted advertisements: the last counter that authenticated.
///
/// AES-CCM proves who wrote an advertisement, not when; anyone can record one and send it again later. BTHome and
/// MiBeacon put a 32-bit counter in the nonce for this, and leave the check to the receiver (bthome.io,
/// "Encryption": "verifying that the counter has increased compared to the previous counter value"; the MiBeacon
/// v5 protocol: the frame counter and the 3 "random number" bytes "become a 4-byte Counter for anti-replay").
///
/// The caller keeps one guard per device, next to its key, and hands it to every decode of that device's
/// advertisements; it is a plain value, so there is no hidden state and a restart of the caller starts a fresh
/// guard. The rule, for a counter `c` whose advertisement authenticated, `last` the counter of the last one that
/// did:
///
/// - no `last` yet: accepted (the first advertisement after the guard was made or ``reset()``);
/// - `c > last`: accepted, a new advertisement;
/// - `c == last`: accepted and marked a repeat (``AdvertisementPayload/isRepeat``): a device sends each
///   advertisement many times between two measurements, with the same counter;
/// - `c < last` and `c < restartThreshold`: accepted, the device restarted. pvvx's firmware keeps its counter in RAM
///   and counts from 0 after a battery change (bthome-ble issue #116), and a guard that refused it would lose the
///   device until someone reset the guard.
///   The threshold is the one bthome-ble applies (Home Assistant's BTHome library, `_check_encryption_counter`:
///   a lower counter is refused only when it is 100 or more), used for MiBeacon too, whose documentation gives none
///   and whose Home Assistant library keeps no counter;
/// - otherwise refused: ``AdvertisementError/Code/replayed``.
///
/// The guard advances only on advertisements that authenticated: a forged one with a high counter cannot lock the
/// device out. The price of the restart rule, as in Home Assistant: a recorded advertisement whose counter is below
/// the threshold can be replayed after the device has counted past it.
public struct ReplayGuard: Sendable, Hashable {
    /// bthome-ble's threshold: counters below it are taken as a restarted device.
    public static let defaultRestartThreshold: UInt32 = 100

    /// The counter of the last advertisement that authenticated, or `nil` before the first.
    public private(set) var lastCounter: UInt32?
    /// Counters below this are accepted even when lower than ``lastCounter``.
    public let restartThreshold: UInt32

    /// A guard that has seen nothing yet.
    public init(restartThreshold: UInt32 = ReplayGuard.defaultRestartThreshold) {
        self.restartThreshold = restartThreshold
    }

    /// What the guard says of a counter.
    enum Verdict: Sendable, Hashable {
        /// A new advertisement.
        case fresh
        /// The same counter as the last accepted one: the device repeating itself.
        case repeated
        /// Lower than the last, below the threshold: the device restarted.
        case restarted
    }

    /// Checks `counter` without recording it (decoders check before decrypting, so a replay costs no AES).
    /// - Throws: ``AdvertisementError/Code/replayed``, with `where` at the start of the message.
    func check(_ counter: UInt32, where context: @autoclosure () -> String) throws(AdvertisementError) -> Verdict {
        guard let lastCounter else { return .fresh }
        if counter > lastCounter { return .fresh }
        if counter == lastCounter { return .repeated }
        if counter < restartThreshold { return .restarted }
        throw AdvertisementError(
            .replayed,
            "\(context()): counter \(counter) is below the last accepted \(lastCounter) (and not below "
                + "\(restartThreshold), so not a restart): an old advertisement sent again")
    }

    /// Records the counter of an advertisement that authenticated.
    mutating func record(_ counter: UInt32) {
        lastCounter = counter
    }

    /// Forgets the last counter: the next authenticated advertisement is accepted whatever its counter (for a
    /// device known to have restarted with a counter above the threshold, or a key that changed).
    public mutating func reset() {
        lastCounter = nil
    }
}
