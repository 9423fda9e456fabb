#include "harness/base/files.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "harness/base/error.h"

namespace ears {

namespace fs = std::filesystem;

std::string read_file(const fs::path& path, std::string_view what, std::string_view fix, std::size_t max_bytes) {
  std::ifstream in(path, std::ios::binary);
  if (!in || fs::is_directory(path))
    fail("{}: cannot read {} ({}); {}", path.string(), what,
         fs::is_directory(path) ? "it is a directory" : std::strerror(errno), fix);
  std::string out;
  char buf[1 << 16];
  while (in.read(buf, sizeof buf) || in.gcount() > 0) {
    out.append(buf, static_cast<std::size_t>(in.gcount()));
    if (out.size() > max_bytes)
      fail("{}: {} is larger than {} bytes; pass the right file (a text file, not a device or a data file)",
           path.string(), what, max_bytes);
  }
  return out;
}

bool create_output_directory(const fs::path& dir) {
  std::error_code ec;
  const bool existed = fs::exists(dir, ec);
  if (existed && !fs::is_directory(dir, ec))
    fail("{}: is a file, not a directory; pass another output path", dir.string());
  fs::create_directories(dir, ec);
  if (ec)
    fail("{}: cannot create the output directory ({}); check its parent exists and is writable", dir.string(),
         ec.message());
  return !existed;
}

namespace {
constexpr std::string_view kTempInfix = ".tmp.";  // "<name>.tmp.<pid>"
}  // namespace

std::string atomic_write_target(const std::string& filename) {
  const auto at = filename.rfind(kTempInfix);
  if (at == std::string::npos || at == 0) return "";
  const std::string_view pid = std::string_view(filename).substr(at + kTempInfix.size());
  if (pid.empty() || !std::all_of(pid.begin(), pid.end(), [](char c) { return c >= '0' && c <= '9'; })) return "";
  return filename.substr(0, at);
}

void write_file_atomic(const fs::path& path, const std::string& content) {
  if (fs::is_directory(path)) fail("{}: is a directory, not a file; remove it or write elsewhere", path.string());
  const fs::path tmp = fmt::format("{}{}{}", path.string(), kTempInfix, static_cast<long>(::getpid()));
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) fail("{}: cannot write ({}); check the directory exists and is writable", path.string(), std::strerror(errno));
  // The bytes reach the disk before the rename publishes them: after a crash the file is the old
  // one or the new one, never a torn mix. A failed write takes its temp file back.
  std::size_t done = 0;
  errno = 0;
  while (done < content.size()) {
    const ssize_t n = ::write(fd, content.data() + done, content.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    done += static_cast<std::size_t>(n);
  }
  const int write_errno = done < content.size() ? (errno ? errno : EIO) : (::fsync(fd) != 0 ? errno : 0);
  ::close(fd);
  std::error_code ec;
  if (write_errno != 0) {
    fs::remove(tmp, ec);
    fail("{}: write failed ({}); check free disk space", path.string(), std::strerror(write_errno));
  }
  fs::rename(tmp, path, ec);
  if (ec) {
    const std::string reason = ec.message();  // before remove() resets ec ("Success")
    fs::remove(tmp, ec);
    fail("{}: cannot replace the file ({})", path.string(), reason);
  }
}

}  // namespace ears
