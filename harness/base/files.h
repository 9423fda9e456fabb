// Base layer: whole-file reads and atomic writes, with one-line errors naming the file.
#pragma once
#include <filesystem>
#include <string>
#include <string_view>

namespace ears {

// The whole file. Fails (ears::Error, exit 2) with "<path>: cannot read <what> (<reason>); <fix>".
std::string read_file(const std::filesystem::path& path, std::string_view what = "the file",
                      std::string_view fix = "check the path and permissions");

// Writes `content` to a temp file beside `path`, then renames it over `path`: a reader sees the
// old file or the new one, never a half-written one.
void write_file_atomic(const std::filesystem::path& path, const std::string& content);

}  // namespace ears
