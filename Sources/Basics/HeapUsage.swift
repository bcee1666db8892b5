import CLinux

/// The process's heap as the allocator counts it.
package enum HeapUsage {
    /// Bytes allocated and not yet freed, in every arena: a data structure's cost is the difference before and
    /// after building it (with nothing else allocating meanwhile).
    package static var bytesInUse: Int { Int(clinux_heap_bytes_in_use()) }
}
