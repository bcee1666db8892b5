/// The version `keepalive --version` prints and a gateway announces to its fleet.
public enum KeepAliveVersion {
    public static let current = "0.6.0"
}
