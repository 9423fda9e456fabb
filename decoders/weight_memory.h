// Host memory for the weights the CPU kernels stream every forward (decoders/layers.h's packed
// linears): 2 MiB-aligned mappings marked MADV_HUGEPAGE, carved by a bump allocator, so the
// stream runs on 2 MiB pages where the kernel's transparent huge pages allow it ("always" or
// "madvise" in /sys/kernel/mm/transparent_hugepage/enabled; "never" leaves 4 KiB pages).
//
// Why: on 4 KiB pages every 4 KiB of a weight stream is a page walk, and the kernels' software
// prefetches (decoders/cpu_avx2.cpp) wait for them. Measured (Zen 4, 2 threads, avx2 kernels, the
// 100M model's 49 linears, two rounds alternating 4 KiB and 2 MiB pages): 1 row 6.06 -> 5.49 ms,
// 6 rows 7.85 -> 6.35 ms, 16 rows 17.6 -> 15.7 ms (docs/performance-log.md, "2026-11-25, fourteenth
// session").
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <string>

namespace ears {
namespace weight_memory {

// An uninitialised 1-D CPU tensor of `numel` elements of `dtype`, 64-byte aligned, in a
// huge-page region. The region lives while any tensor carved from it does.
at::Tensor empty(int64_t numel, c10::ScalarType dtype);

// The same pages in a mapping of its own, not counted as weights (pages_summary), zero-filled (a
// fresh anonymous mapping): for buffers streamed as the weights are (the KV cache,
// decoders/kv_cache.h; the bandwidth probe, harness/bench/probe.h). Unmapped when the tensor goes.
// Out of memory: "cannot map N MiB for <purpose>" (purpose: what it holds, and the fix).
at::Tensor empty_like_weights(int64_t numel, c10::ScalarType dtype, const std::string& purpose);

// What the weights got, for the reports (harness/run/environment.h), e.g. "2 MiB pages: 191 of
// 191 MiB (THP madvise)" or "4 KiB pages: 191 MiB (THP never)" — the huge-page bytes are the
// process's AnonHugePages (/proc/self/smaps_rollup), capped at the bytes of the live tensors
// carved here; "" when none are alive (the aten path, accelerators).
std::string pages_summary();

}  // namespace weight_memory
}  // namespace ears
