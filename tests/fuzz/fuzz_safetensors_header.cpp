// libFuzzer target: the safetensors header parser (decoders/safetensors_header.h) on arbitrary
// bytes. It may only return a header whose every span lies inside the file without overlaps, or
// throw ears::Error; anything else (crash, other exception, sanitizer report) is a bug.
#include <cstddef>
#include <cstdint>
#include <algorithm>
#include <cstdlib>
#include <utility>
#include <vector>

#include "decoders/safetensors_header.h"
#include "harness/base/error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    const ears::SafetensorsHeader h = ears::parse_safetensors_header(data, size, "fuzz.safetensors");
    uint64_t prev_end = h.data_offset;
    std::vector<std::pair<uint64_t, uint64_t>> spans;
    for (const auto& t : h.tensors) {
      if (t.begin < h.data_offset || t.end < t.begin || t.end > size) std::abort();
      if (t.nbytes() != t.numel() * ears::safetensors_dtype_size(t.dtype)) std::abort();
      spans.emplace_back(t.begin, t.end);
    }
    std::sort(spans.begin(), spans.end());
    for (const auto& [b, e] : spans) {
      if (b < prev_end && e > b) std::abort();  // overlap with a non-empty span
      if (e > b) prev_end = e;
    }
  } catch (const ears::Error&) {
  }
  return 0;
}
