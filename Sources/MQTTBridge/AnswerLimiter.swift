/// How many answers to rejected commands go out on the error topics: a token bucket per device (the gateway's
/// `error` topic counts as one device) and one for the whole gateway, so that a client flooding one topic or many
/// cannot make the bridge flood the broker back. An answer withheld is counted, and the next one that goes out on
/// its topic says how many were. Pure: instants come in. Keys are configured devices and the gateway, so the
/// memory is bounded by the configuration, not by what arrives.
///
/// ```swift
/// var limiter = AnswerLimiter()
/// if case .send(let withheld) = limiter.admit("sensor-1", at: now) { publish(answer, noting: withheld) }
/// ```
struct AnswerLimiter: Sendable {
    /// A bucket's size and how often it gains a token.
    struct Rate: Sendable, Hashable {
        var burst: Double
        var every: Duration
    }

    enum Decision: Sendable, Hashable {
        /// Answer, noting the `withheld` answers on this key since the last one that went out.
        case send(withheld: Int)
        /// Do not answer (counted).
        case withhold
    }

    private struct Bucket: Sendable {
        var tokens: Double
        var at: Duration
        var withheld = 0

        mutating func refill(_ rate: Rate, at now: Duration) {
            let gained = (now - at) / rate.every
            tokens = min(rate.burst, tokens + max(gained, 0))
            at = now
        }
    }

    let perKey: Rate
    let total: Rate
    private var buckets: [String: Bucket] = [:]
    private var gateway: Bucket?

    /// By default 5 answers at once per device and then one each 12 s (5 a minute); 20 at once for the gateway
    /// and then one each 3 s.
    init(
        perKey: Rate = Rate(burst: 5, every: .seconds(12)), total: Rate = Rate(burst: 20, every: .seconds(3))
    ) {
        self.perKey = perKey
        self.total = total
    }

    /// An answer on `key`'s error topic, wanted at `now` (monotonic).
    mutating func admit(_ key: String, at now: Duration) -> Decision {
        var bucket = buckets[key] ?? Bucket(tokens: perKey.burst, at: now)
        var all = gateway ?? Bucket(tokens: total.burst, at: now)
        bucket.refill(perKey, at: now)
        all.refill(total, at: now)
        defer {
            buckets[key] = bucket
            gateway = all
        }
        guard bucket.tokens >= 1, all.tokens >= 1 else {
            bucket.withheld += 1
            return .withhold
        }
        bucket.tokens -= 1
        all.tokens -= 1
        let withheld = bucket.withheld
        bucket.withheld = 0
        return .send(withheld: withheld)
    }
}
