// Base layer: the one splitmix64 (Steele, Lea & Flood 2014), a small deterministic PRNG
// (xoshiro256** seeded by splitmix64) and FNV-1a, identical on every platform. Includes nothing else.
#pragma once
#include <cstdint>
#include <string_view>

namespace ears {

inline constexpr uint64_t kSplitmixGamma = 0x9E3779B97F4A7C15ULL;

// The splitmix64 finaliser of x + gamma: a bijection on 64-bit integers.
constexpr uint64_t splitmix64(uint64_t x) {
  x += kSplitmixGamma;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ULL;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBULL;
  return x ^ (x >> 31);
}

// The splitmix64 generator: the next output of the stream `state` (advances it).
inline uint64_t splitmix64_next(uint64_t& state) {
  const uint64_t out = splitmix64(state);
  state += kSplitmixGamma;
  return out;
}

// A double in [0, 1) from the top 53 bits.
constexpr double unit_double(uint64_t bits) { return static_cast<double>(bits >> 11) * 0x1.0p-53; }

// FNV-1a 64 of a byte string (request keys, file fingerprints).
constexpr uint64_t fnv1a64(std::string_view s, uint64_t h = 0xcbf29ce484222325ULL) {
  for (unsigned char c : s) h = (h ^ c) * 0x100000001b3ULL;
  return h;
}

class Rng {
 public:
  explicit Rng(uint64_t seed);
  uint64_t next();
  uint64_t below(uint64_t n);  // uniform in [0, n), n > 0
  double uniform();            // uniform in [0, 1)
 private:
  uint64_t s_[4];
};

}  // namespace ears
