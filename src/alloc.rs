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
pub fn release_freed_memory() {
    // SAFETY: mi_collect only frees memory that no allocation uses; no pointer involved.
    unsafe { libmimalloc_sys::mi_collect(true) }
}
