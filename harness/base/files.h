// Base layer: whole-file reads and atomic writes, with one-line errors naming the file.
#pragma once
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>

namespace ears {

// The whole file. Fails (ears::Error, exit 2) with "<path>: cannot read <what> (<reason>); <fix>",
// and when it holds more than `max_bytes` (a text file the user names, which could be /dev/zero).
std::string read_file(const std::filesystem::path& path, std::string_view what = "the file",
                      std::string_view fix = "check the path and permissions", std::size_t max_bytes = SIZE_MAX);
inline constexpr std::size_t kMaxTextFileBytes = std::size_t{16} << 20;  // configs, rules: 16 MiB

// create_directories for an output directory; one line naming the path and the fix when it cannot
// be made (a file of that name, an unwritable parent). Returns whether it was created now.
bool create_output_directory(const std::filesystem::path& dir);

// Writes `content` to a temp file beside `path`, then renames it over `path`: a reader sees the
// old file or the new one, never a half-written one.
void write_file_atomic(const std::filesystem::path& path, const std::string& content);
// The file a write_file_atomic temp file ("<name>.tmp.<pid>", left by a killed writer) was for:
// "<name>"; empty for any other file name.
std::string atomic_write_target(const std::string& filename);

}  // namespace ears
