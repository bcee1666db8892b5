/// The commented example configuration: the reference users copy from, and what `keepalive demo` runs against
/// the simulated BlueZ (its five sensors `C0:FF:EE:00:00:01`…`05` and its five profile sensors
/// `C0:FF:EE:01:00:01`…`05`, and two of its advertising sensors, on `hci0`).
///
/// `Examples/keepalive.yaml` is a byte-identical copy; a test keeps the two equal.
///
/// ```swift
/// let configuration = try ConfigurationLoader.parse(ExampleConfiguration.yaml, file: "example.yaml")
/// configuration.devices.count  // 12
/// ```
public enum ExampleConfiguration {
    public static let yaml: String = """
        # keepalive configuration: `keepalive run --config keepalive.yaml`
        #
        # Keeps Bluetooth Low Energy devices awake (and their readings fresh) by connecting to each one on a
        # schedule and reading, writing or listening to some of its characteristics.
        #
        # Conventions:
        # - durations are a number and a unit: 500ms, 30s, 2m, 1h, 1.5s. A bare number (30) is refused,
        #   since it could mean seconds or milliseconds.
        # - UUIDs are 16-bit (2a19), 32-bit (00002a19) or 128-bit (4b410002-6b65-6570-616c-697665000000).
        # - every key except `devices` is optional; an unknown key is an error, so a typo never passes silently.

        # Time between two polls of a device, on mains power. Duration; default 30s.
        interval: 30s

        # The floor: no interval may be shorter, here or in an MQTT `interval/set` command (refused on the
        # device's error topic, naming it), and an MQTT `poll` command polls a device at most once per this long.
        # Duration; default 5s. A device may have its own (`min_interval:` in its entry).
        min_interval: 5s

        # Each poll starts up to this much later, at random, so devices are not all polled at the same
        # moment. Duration, shorter than interval; default 0s (no jitter).
        jitter: 2s

        # How long one poll (connect, write, read, listen) may take before it is abandoned. Duration,
        # shorter than interval; default the smaller of 20s and two thirds of the interval.
        window_budget: 20s

        # What to do when the host saves energy. Default {multiplier: 2, critical: pause}.
        low_power:
          # Where the power state comes from: `auto` follows UPower and power-profiles-daemon (or, without
          # them, /sys/class/power_supply); `on` is always low power, `off` never. Default auto. At run time,
          # SIGUSR1 forces low power and SIGUSR2 returns to this mode.
          mode: auto
          # On battery or in power-saver mode, every interval is multiplied by this. Number from 1 to 1000;
          # default 2.
          multiplier: 2
          # When the battery is critically low: `pause` stops polling until power recovers, and
          # `{stretch: 4}` multiplies every interval by 4 instead (1 to 1000). Default pause.
          critical: pause
          # The battery is critically low at or below this percentage while discharging. 1 to 50; default 10.
          critical_below: 10

        # The Bluetooth adapter of every device that does not name its own: hci0, hci1, … Default hci0.
        adapter: hci0

        # At most this many devices connected at the same time on each adapter. Whole number from 1 to 16;
        # default 3.
        max_connections: 3

        # Give each device a place in its interval so that the devices of an adapter need no more than
        # max_connections links at once (learned from how long their polls take; none waits for a slot when
        # they fit). false polls every device at the same moments. Default true.
        placement: true

        # When a device is connected to: `always` at every tick, or `heard`: only when the device was heard
        # advertising since its last tick (a sensor that is away costs no Connect; the tick is recorded as
        # `notHeard`). Default always. A device may have its own (`poll_when:` in its entry).
        poll_when: always

        # Where poll records go, one JSON object per line: "-" for standard output, else a file path
        # (appended to). Default "-".
        output: "-"

        # Where the daemon keeps what must outlive it besides the MQTT spool: the pending deferred tasks
        # (deferred.json) and how far each sensor's history was published (history.json). Default
        # $STATE_DIRECTORY (systemd's StateDirectory=), else /var/lib/keepalive.
        # state_directory: /var/lib/keepalive

        # The devices to keep alive: at least one. Each has
        #   name      required, unique: names the device in records and logs
        #   address   required: AA:BB:CC:DD:EE:FF (either case), unique per adapter
        #   adapter   optional: this device's adapter instead of the one above
        #   interval  optional duration: this device's own interval instead of the one above
        #   budget    optional duration: this device's window budget, shorter than its interval
        #   min_interval  optional duration: this device's floor instead of the one above
        #   profile   optional: a kind of sensor (`keepalive profiles` lists them: mi-flora, lywsd03mmc,
        #             environmental-sensing, battery, heart-rate, health-thermometer) that brings its writes,
        #             reads, notifications and how to decode them; the entries below add to it
        #   fields    optional: per reading of the profile, {scale, offset, unit, valid} to change
        #   poll_when optional: this device's `always` or `heard` instead of the one above
        #   advertisements  optional: the format of its advertisements, `bthome`, `pvvx`, `atc1441`,
        #             `mibeacon`, `ruuvi` or `auto`; with nothing to read, write or listen to, the device is
        #             passive: heard, never connected to (one record per tick from what it said meanwhile)
        #   key / key_file  optional: its 16-byte key as 32 hex digits (BTHome's encryption key, Xiaomi's
        #             bind key), or a file holding it (relative to this file); never shown in a message
        #   history   optional: download the sensor's own log every this long, `24h`, or {every: 24h,
        #             on_battery: true}; only while the MQTT broker is connected and, unless on_battery,
        #             on external power; profiles with one: mi-flora (README: Sensor history and clocks)
        #   clock_sync  optional: set the sensor's clock to the gateway's every this long, `24h`; profiles
        #             with one: lywsd03mmc
        # and, unless a profile or `advertisements` says it, at least one of
        #   write     [{uuid, value, type}]: value is hex bytes, "01ff", "0x01ff", "01:ff" or "01 ff";
        #             type is `request` (acknowledged, the default) or `command` (without response)
        #   read      [uuid, …]: characteristics to read; or {uuid, name} to name the reading of a value the
        #             SIG table does not know, or {uuid, size, fields: [{name, at, format, scale, offset,
        #             unit, valid}]} for the fields of a vendor payload (README: Readings)
        #   notify    [{uuid, for}]: characteristics to listen to, each `for` a duration shorter than the
        #             device's window budget; `name`, `size` and `fields` as for read
        # Each poll does the writes (in order), then the reads, then listens to all notifications at once.
        # Records carry the raw bytes (`values`) and the decoded `readings`: numbers with units.
        devices:
          # The simplest entry: read two standard characteristics, in their 16-bit form.
          - name: greenhouse-north
            address: C0:FF:EE:00:00:01
            read: [2a19, 2a6e]              # Battery Level, Temperature

          # 16-bit and 128-bit UUIDs mix freely. A vendor characteristic the SIG table does not know is shown as
          # hex unless its fields are given: here the sensor's counter, a 32-bit little-endian number.
          - name: greenhouse-south
            address: C0:FF:EE:00:00:02
            read:
              - 2a19                                    # Battery Level
              - uuid: 4b410002-6b65-6570-616c-697665000000
                fields: [{name: counter, at: 0, format: uint32le}]

          # A write before the reads: set the sensor's setting to 01, then read it back.
          - name: cold-room
            address: C0:FF:EE:00:00:03
            write:
              - uuid: 4b410003-6b65-6570-616c-697665000000
                value: "01"
                type: request
            read:
              - {uuid: 4b410003-6b65-6570-616c-697665000000, name: setting}   # one byte, shown as hex
              - 2a6e

          # A slow device on its own interval (and its own adapter, here the same one).
          - name: battery-bank
            address: C0:FF:EE:00:00:04
            adapter: hci0
            interval: 2m
            read: [2a19]

          # A fast device with its own interval and budget, listening to the counter for 1s each poll.
          - name: incubator
            address: C0:FF:EE:00:00:05
            interval: 10s
            budget: 5s
            read: [2a6e]
            notify:
              - uuid: 4b410002-6b65-6570-616c-697665000000
                for: 1s
                fields: [{name: counter, at: 0, format: uint32le}]

          # Sensors by profile, polled every 5 minutes. A Mi Flora plant sensor: the profile writes the mode
          # change (A0 1F) before reading, and decodes temperature, light, moisture, conductivity, battery and
          # firmware; here its moisture is only trusted between 5 and 95 %.
          - name: fern
            address: C0:FF:EE:01:00:01
            interval: 5m
            profile: mi-flora
            fields:
              moisture: {valid: [5, 95]}

          # A Xiaomi LYWSD03MMC thermometer (stock firmware): listened to until it notifies.
          - name: bedroom
            address: C0:FF:EE:01:00:02
            interval: 5m
            profile: lywsd03mmc

          # An Environmental Sensing device: the SIG's temperature and humidity, plus a vendor probe whose
          # value is decoded by its own Characteristic Presentation Format descriptor (0x2904).
          - name: freezer
            address: C0:FF:EE:01:00:03
            interval: 5m
            profile: environmental-sensing
            read:
              - {uuid: 4b410102-6b65-6570-616c-697665000000, name: probe_temperature}

          # Health devices: a heart-rate strap and a thermometer, both SIG formats.
          - name: runner
            address: C0:FF:EE:01:00:04
            interval: 5m
            profile: heart-rate

          - name: patient
            address: C0:FF:EE:01:00:05
            interval: 5m
            profile: health-thermometer

          # Passive sensors: heard, never connected to, so their batteries pay for nothing but advertising. A
          # BTHome thermometer (Shelly, pvvx firmware, ESPHome), and a stock Xiaomi LYWSD03MMC whose MiBeacon
          # advertisements are encrypted with its bind key.
          - name: porch
            address: C0:FF:EE:02:00:01
            advertisements: bthome

          - name: hallway
            address: C0:FF:EE:02:00:04
            advertisements: mibeacon
            key: b853075158487ca39a5b5ea9cd8e6b2f

        """
}

extension DaemonConfiguration {
    /// The prefix of the simulated devices' addresses (the example's and `bluez-sim`'s).
    public static let simulatedAddressPrefix = "C0:FF:EE:"

    /// Whether every device is a simulated one (`C0:FF:EE:…`): the example configuration as installed, which on a
    /// gateway would poll nothing, forever. The installed unit's `ExecCondition` (`keepalive run --condition`)
    /// keeps the daemon from starting until the file names a real device.
    public var namesOnlySimulatedDevices: Bool {
        devices.allSatisfy { $0.address.uppercased().hasPrefix(Self.simulatedAddressPrefix) }
    }
}
