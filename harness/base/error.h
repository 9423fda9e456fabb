// The one user-facing error type. Every failure a user can cause (bad file, bad config, bad
// flag) is thrown as ears::Error with a one-line message naming the file, line/key and fix;
// main() prints it as "ears-bench: error: <message>" and exits with its code (2 = bad input).
#pragma once
#include <fmt/format.h>
#include <stdexcept>
#include <string>

namespace ears {

struct Error : std::runtime_error {
  int exit_code;
  explicit Error(const std::string& message, int code = 2) : std::runtime_error(message), exit_code(code) {}
};

template <class... Args>
[[noreturn]] void fail(fmt::format_string<Args...> format, Args&&... args) {
  throw Error(fmt::format(format, std::forward<Args>(args)...));
}

}  // namespace ears
