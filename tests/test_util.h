// Shared helpers for tests: where the repo and ../shared are, and skipping when shared is absent.
#pragma once
#include <gtest/gtest.h>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

namespace ears::test {

inline std::filesystem::path source_dir() { return EARS_SOURCE_DIR; }

// ../shared beside the checkout (or $EARS_SHARED_DIR). Empty path when absent.
inline std::filesystem::path shared_dir() {
  if (const char* env = std::getenv("EARS_SHARED_DIR")) return env;
  auto p = source_dir().parent_path() / "shared";
  return std::filesystem::exists(p) ? p : std::filesystem::path();
}

inline std::string read_file(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace ears::test

// Skips the current test with a clear message when ../shared (or the sub-path) is missing.
#define EARS_REQUIRE_SHARED(subpath)                                                          \
  do {                                                                                        \
    if (::ears::test::shared_dir().empty() ||                                                 \
        !std::filesystem::exists(::ears::test::shared_dir() / (subpath)))                     \
      GTEST_SKIP() << "needs ../shared/" << (subpath)                                         \
                   << " beside the checkout (or EARS_SHARED_DIR); not found, skipping";       \
  } while (0)
