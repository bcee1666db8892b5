/// The configuration file of a private bus: system-bus type and authentication, a socket in a temporary
/// directory, optionally a TCP listener on 127.0.0.1 with ANONYMOUS authentication, and a policy that allows
/// everything. No `<limit>` elements: the daemon keeps the real system bus's limits (256 connections per user,
/// 128 pending replies per connection).
enum PrivateBusConfiguration {
    /// The configuration text for a daemon listening on `socketPath` and, when given, on `tcpPort`
    /// (0 lets the kernel choose).
    static func text(socketPath: String, tcpPort: UInt16?) -> String {
        var listeners = "  <listen>unix:path=\(socketPath)</listen>\n"
        var authentication = "  <auth>EXTERNAL</auth>\n"
        if let tcpPort {
            listeners += "  <listen>tcp:host=127.0.0.1,bind=127.0.0.1,port=\(tcpPort),family=ipv4</listen>\n"
            // ANONYMOUS as the lab's guest bus does it: libdbus and gdbus clients authenticate without a uid.
            authentication += "  <auth>ANONYMOUS</auth>\n  <allow_anonymous/>\n"
        }
        return """
            <!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
             "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
            <busconfig>
              <type>system</type>
            \(listeners)\(authentication)  <policy context="default">
                <allow user="*"/>
                <allow own="*"/>
                <allow send_type="method_call"/>
                <allow send_type="signal"/>
                <allow send_type="method_return"/>
                <allow send_type="error"/>
                <allow send_destination="*"/>
                <allow receive_type="method_call"/>
                <allow receive_type="signal"/>
                <allow receive_type="method_return"/>
                <allow receive_type="error"/>
                <allow receive_sender="*"/>
              </policy>
            </busconfig>

            """
    }

    /// A bus that denies as the system bus does: the default policy of the installed system.conf, root allowed
    /// to own and call `org.bluez` and the simulator's control name (a simulator in the test process), then
    /// `policies` included as /etc/dbus-1/system.d includes them.
    static func systemLike(
        socketPath: String, including policies: [String], systemConf: String = "/usr/share/dbus-1/system.conf"
    )
        throws -> String
    {
        guard let text = TextFile.read(systemConf) else {
            throw PrivateBusError.setup("cannot read \(systemConf) for the system bus's default policy")
        }
        guard let start = text.firstRange(of: "<policy context=\"default\">"),
            let end = text[start.upperBound...].firstRange(of: "</policy>")
        else { throw PrivateBusError.setup("\(systemConf) has no default policy") }
        let defaultPolicy = String(text[start.lowerBound..<end.upperBound])
        let includes = policies.map { "  <include>\($0)</include>\n" }.joined()
        return """
            <!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
             "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
            <busconfig>
              <type>system</type>
              <listen>unix:path=\(socketPath)</listen>
              <auth>EXTERNAL</auth>
              \(defaultPolicy)
              <policy user="root">
                <allow own="org.bluez"/>
                <allow send_destination="org.bluez"/>
                <allow own="io.keepalive.Simulator"/>
                <allow send_destination="io.keepalive.Simulator"/>
              </policy>
            \(includes)</busconfig>

            """
    }
}
