//! The memory allocator of every binary built on this library: mimalloc, and a way to
//! hand freed memory back to the OS after a dataset load.
//!
//! Why mimalloc, not glibc's malloc: perf put malloc/free at a fifth of a billed lookup's
//! CPU, and `bench/api.sh` measured, one run each under the same load, write-behind
//! 25,871 vs 21,493 req/s, durable 12,326 vs 8,997 and all countries 21,170 vs 14,528
//! (mimalloc vs glibc).

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Returns the calling thread's freed memory to the OS now. A dataset load allocates and
/// frees hundreds of MB of temporaries on one thread, which then sits idle: mimalloc
/// purges freed pages only when that thread allocates again, so without this they stay in
/// RSS (about 30 MB after a full-set load, measured with `MIMALLOC_PURGE_DELAY=0`).
///
/// SQLite (bundled) allocates with the C library's malloc, not mimalloc: its page cache
/// after a full scan is tens of MB that glibc keeps in its arenas once freed. So glibc's
/// free pages are handed back too (`malloc_trim`).
pub fn release_freed_memory() {
    // SAFETY: mi_collect only frees memory that no allocation uses; no pointer involved.
    unsafe { libmimalloc_sys::mi_collect(true) }
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only returns free memory of glibc's heaps to the OS.
    unsafe {
        libc::malloc_trim(0);
    }
}

/// Turns transparent huge pages off for this process (`prctl(PR_SET_THP_DISABLE)`).
///
/// mimalloc asks the kernel for huge pages on its memory (`madvise(MADV_HUGEPAGE)`), and
/// with this machine's setting (`/sys/kernel/mm/transparent_hugepage/defrag` = madvise) a
/// fault on such a page may compact memory synchronously, on the request's thread: the
/// city benchmark had one query per run at 6-16 ms (JP `Sbkaemachi`, IN `Gdualur`; under
/// 1 ms otherwise), the version before mimalloc none. Without huge pages a full-set server
/// also holds about 36 MB less (407 vs 443 MB RSS, 230-260 MB of it had been huge pages).
/// Called first thing by `postal` (the server); the flag covers memory mapped before.
pub fn disable_huge_pages() {
    #[cfg(target_os = "linux")]
    // SAFETY: prctl with PR_SET_THP_DISABLE takes integers only and changes a flag of
    // this process; nothing else is touched.
    unsafe {
        libc::prctl(libc::PR_SET_THP_DISABLE, 1, 0, 0, 0);
    }
}
