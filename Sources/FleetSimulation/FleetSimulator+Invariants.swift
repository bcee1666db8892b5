import Fleet

/// The invariants, checked as the run goes:
/// - exactly one: at no true instant are two gateways entitled to poll one device (entitled = between the state
///   machine's `holdStarted` and the earlier of `holdEnded`, the fence on its own clock, or the process's death);
/// - liveness: a device that some live, connected gateway can reach has a holder again within lease × (1 + ρ) +
///   one poll interval of losing its holder (or of such a gateway becoming available, if later);
/// - convergence: after the faults and one settling period, no placement moves, and each device is held by a
///   gateway whose true RSSI is within the margin (plus the noise) of the best.
extension FleetSimulator {
    mutating func violation(_ text: String) {
        report.violationCount += 1
        if report.violations.count < 5 { report.violations.append("t=\(Double(now) / 1e9)s \(text)") }
    }

    mutating func entitle(device name: String, gateway: Int, until local: FleetInstant, starting: Bool) {
        guard let device = deviceIndex[name] else { return }
        let until = gateways[gateway].clock.trueTime(atLocal: local.nanoseconds)
        var track = tracks[device]
        for hold in track.holds where hold.gateway != gateway && hold.until > now {
            violation(
                """
                    \(name): \(gateways[gateway].name) entitled while \(gateways[hold.gateway].name) is until \
                    t=\(Double(hold.until) / 1e9)s
                    """
            )
        }
        let previouslyHeld = track.activeHolder(at: now) != nil
        if starting && !previouslyHeld {
            let start = max(track.lastEnd ?? Int64.min, availableSince(device) ?? now)
            let gap = now - start
            if gap > report.maximumHandoverNanoseconds { report.maximumHandoverNanoseconds = gap }
            if gap > handoverBound, track.reportedOrphanSince != start {
                violation("\(name) held again after \(Double(gap) / 1e9)s")
            }
        }
        track.holds.removeAll { $0.until <= now || $0.gateway == gateway }
        track.holds.append((gateway, until))
        tracks[device] = track
    }

    mutating func endEntitlement(device name: String, gateway: Int) {
        guard let device = deviceIndex[name] else { return }
        var track = tracks[device]
        guard let position = track.holds.firstIndex(where: { $0.gateway == gateway }) else { return }
        let end = min(track.holds[position].until, now)
        track.lastEnd = max(track.lastEnd ?? end, end)
        track.holds.remove(at: position)
        tracks[device] = track
    }

    /// Keeps each gateway's "available since" (alive, connected, broker up): liveness is owed from the moment the
    /// longest-available *current* candidate became available (one that came and went owes nothing).
    mutating func refreshAvailability(_ gateway: Int) {
        let state = gateways[gateway]
        let available = state.isAlive && state.clientConnected && state.connectionLive && broker.isUp && !state.stopping
        guard available != state.available else { return }
        gateways[gateway].available = available
        gateways[gateway].availableSince = available ? now : nil
    }

    func availableSince(_ device: Int) -> Int64? {
        tracks[device].candidates.compactMap { gateways[$0].availableSince }.min()
    }

    /// Finds devices left without a holder for longer than the bound (the check at `holdStarted` would never see
    /// a device that is never taken again).
    mutating func sweepLiveness() {
        for device in tracks.indices {
            let track = tracks[device]
            guard track.activeHolder(at: now) == nil, let since = availableSince(device) else { continue }
            let latestEnd = track.holds.map(\.until).max() ?? Int64.min
            let start = max(track.lastEnd ?? Int64.min, latestEnd, since)
            if now - start > handoverBound, track.reportedOrphanSince != start {
                tracks[device].reportedOrphanSince = start
                violation("\(track.name) without a holder for \(Double(now - start) / 1e9)s")
            }
        }
    }

    mutating func finalChecks() {
        sweepLiveness()
        let margin = 10 + scenario.rssiNoise
        for device in tracks.indices {
            let track = tracks[device]
            guard let holder = track.activeHolder(at: now) else {
                report.unheldAtEnd += 1
                if scenario.duration > convergenceAt { violation("\(track.name) not held at the end") }
                continue
            }
            guard let position = gateways[holder].devices.firstIndex(of: device) else { continue }
            let rssi = gateways[holder].trueRSSI[position]
            if rssi == track.bestRSSI { report.heldByBest += 1 }
            if rssi >= track.bestRSSI - margin {
                report.heldWithinMargin += 1
            } else if scenario.duration > convergenceAt {
                violation("\(track.name) held at \(rssi) dBm, best \(track.bestRSSI) dBm")
            }
        }
    }
}
