#if canImport(Glibc)
    import Glibc
#endif

/// Runs `body` on a detached POSIX thread of its own: for a blocking read or wait that must not hold one of the
/// executor's threads (Foundation's `Thread` would link Foundation into the daemon). False, with nothing started,
/// when `pthread_create` failed; the caller decides what that means.
package func startDetachedThread(_ body: @escaping @Sendable () -> Void) -> Bool {
    let context = Unmanaged.passRetained(DetachedWork(body)).toOpaque()
    var attributes = pthread_attr_t()
    pthread_attr_init(&attributes)
    defer { pthread_attr_destroy(&attributes) }
    pthread_attr_setdetachstate(&attributes, Int32(PTHREAD_CREATE_DETACHED))
    var thread = pthread_t()
    let created = pthread_create(
        &thread, &attributes,
        { context in
            Unmanaged<DetachedWork>.fromOpaque(context!).takeRetainedValue().body()
            return nil
        }, context)
    guard created == 0 else {
        Unmanaged<DetachedWork>.fromOpaque(context).release()
        return false
    }
    return true
}

private final class DetachedWork: Sendable {
    let body: @Sendable () -> Void
    init(_ body: @escaping @Sendable () -> Void) { self.body = body }
}
