import Polling

/// The daemon's admission of every poll: a device its operator paused is declined (``DeviceBoard/pause(_:)``), a
/// shared device goes to the fleet's binding; a declined tick is told to the board, since it writes no record and
/// `keepalive explain` must still say why the device was not polled.
struct ControlAdmission: PollAdmission {
    let board: DeviceBoard
    let fleet: FleetBinding?

    func admit(_ device: String) -> PollAdmissionDecision {
        if board.isPaused(device) {
            board.declined(device, paused: true, holder: nil)
            return .paused
        }
        guard let fleet else { return .poll(nil) }
        let decision = fleet.admit(device)
        if decision == .decline { board.declined(device, paused: false, holder: fleet.holder(of: device)) }
        return decision
    }

    func records(_ device: String) -> Bool {
        !board.isPaused(device) && (fleet?.records(device) ?? true)
    }
}
