// Scalar bf16 <-> fp32 on raw bit patterns, shared by the CPU kernels (decoders/cpu_bf16,
// decoders/cpu_avx2). Plain C++ (no target attributes): safe to include in files whose other
// functions are compiled for AVX2 / AVX-512.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

namespace ears {
namespace bf16_bits {

// Exact widening.
inline float from_bf16(uint16_t h) {
  const uint32_t bits = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

// Round to nearest even, NaN stays NaN (c10::BFloat16's conversion).
inline uint16_t to_bf16(float f) {
  if (std::isnan(f)) return 0x7fc0;
  uint32_t bits;
  std::memcpy(&bits, &f, sizeof bits);
  bits += 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<uint16_t>(bits >> 16);
}

}  // namespace bf16_bits
}  // namespace ears
