// Experiment configuration, internal: YAML node helpers (locations, typed scalar readers, env
// expansion, marks). See yaml.h.
#include "harness/config/yaml.h"

#include <yaml-cpp/eventhandler.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cstdlib>
#include <limits>
#include <sstream>
#include <vector>

#include "decoders/param_ranges.h"
#include "harness/base/error.h"
#include "harness/base/strings.h"
#include "harness/base/utf8.h"

namespace ears::config::detail {
namespace fs = std::filesystem;

namespace {
bool is_control(unsigned char b) { return (b < 0x20 && b != '\t' && b != '\n' && b != '\r') || b == 0x7F; }
}  // namespace

// ---------------------------------------------------------------- locations and errors

bool from_override(const Node& n) { return !n.IsDefined() || n.Mark().is_null(); }

std::string where(const Ctx& c, const Node& n) {
  if (from_override(n)) return "(from --set)";
  return fmt::format("{}:{}:{}", c.file, n.Mark().line + 1, n.Mark().column + 1);
}

[[noreturn]] void fail_at(const Ctx& c, const Node& n, std::string_view path, std::string_view problem,
                          std::string_view fix) {
  throw Error(fmt::format("{}: {}: {}; {}", where(c, n), path, problem, fix));
}

std::string describe(const Node& n) {
  switch (n.Type()) {
    case YAML::NodeType::Map: return "a mapping";
    case YAML::NodeType::Sequence: return "a list";
    case YAML::NodeType::Null: return "nothing (null)";
    case YAML::NodeType::Scalar: return fmt::format("'{}'", n.Scalar());
    default: return "nothing";
  }
}

// The last key of a path, skipping list indices: "draft.aux_layers.1" -> "aux_layers".
std::string leaf_of(std::string_view path) {
  while (true) {
    auto dot = path.rfind('.');
    std::string_view last = dot == std::string_view::npos ? path : path.substr(dot + 1);
    bool index = !last.empty() && std::all_of(last.begin(), last.end(), [](char ch) { return std::isdigit(static_cast<unsigned char>(ch)); });
    if (!index || dot == std::string_view::npos) return std::string(last);
    path = path.substr(0, dot);
  }
}

// ---------------------------------------------------------------- typed scalar readers

std::string as_string(const Ctx& c, const Node& n, const std::string& path) {
  if (!n.IsScalar())
    fail_at(c, n, path, fmt::format("expected a string, got {}", describe(n)),
            fmt::format("write a plain value, e.g. '{}: text'", leaf_of(path)));
  for (unsigned char b : n.Scalar())  // e.g. from a "\x18" escape
    if (is_control(b))
      fail_at(c, n, path, fmt::format("the value contains the control character U+{:04X}", b), "remove it");
  // yaml-cpp decodes the escapes "\N" and "\_" to the lone bytes 0x85 / 0xA0, not UTF-8 (found by fuzz_config).
  if (size_t at = utf8::first_invalid(n.Scalar()); at != std::string::npos)
    fail_at(c, n, path, fmt::format("the value is not valid UTF-8 (byte 0x{:02X})", static_cast<unsigned char>(n.Scalar()[at])),
            "write the character itself instead of a \\N or \\_ escape");
  return n.Scalar();
}

// A YAML stream is printable Unicode: invalid UTF-8 or a C0 control character other than tab /
// LF / CR is an error at its line and column (yaml-cpp accepts some of them and then emits YAML
// it cannot read back; found by fuzz_config).
void check_yaml_text(const std::string& text, const std::string& label) {
  int line = 1, col = 1;
  for (size_t i = 0; i < text.size();) {
    const auto b = static_cast<unsigned char>(text[i]);
    const int len = utf8::step(text, i);
    if (len <= 0)
      throw Error(fmt::format("{}:{}:{}: (yaml): invalid UTF-8 (byte 0x{:02X}); save the file as UTF-8 text", label, line,
                              col, b));
    if (len == 1 && is_control(b))
      throw Error(fmt::format("{}:{}:{}: (yaml): control character U+{:04X} is not allowed in YAML; remove it", label,
                              line, col, b));
    if (b == '\n') ++line, col = 1;
    else ++col;
    i += static_cast<size_t>(len);
  }
}

namespace {
// Parser events, ignored but for where each document starts.
struct DocumentStarts : YAML::EventHandler {
  std::vector<YAML::Mark> starts;
  void OnDocumentStart(const YAML::Mark& mark) override { starts.push_back(mark); }
  void OnDocumentEnd() override {}
  void OnNull(const YAML::Mark&, YAML::anchor_t) override {}
  void OnAlias(const YAML::Mark&, YAML::anchor_t) override {}
  void OnScalar(const YAML::Mark&, const std::string&, YAML::anchor_t, const std::string&) override {}
  void OnSequenceStart(const YAML::Mark&, const std::string&, YAML::anchor_t, YAML::EmitterStyle::value) override {}
  void OnSequenceEnd() override {}
  void OnMapStart(const YAML::Mark&, const std::string&, YAML::anchor_t, YAML::EmitterStyle::value) override {}
  void OnMapEnd() override {}
};
}  // namespace

void check_single_document(const std::string& text, const std::string& label) {
  std::istringstream in(text);
  YAML::Parser parser(in);
  DocumentStarts events;
  // Counted, not "until a second start": on "," the parser keeps returning documents it never starts.
  for (int docs = 0; docs < 2 && parser.HandleNextDocument(events); ++docs) {
  }
  if (events.starts.size() < 2) return;
  const YAML::Mark& m = events.starts[1];
  throw Error(fmt::format("{}:{}:{}: (document): a second YAML document (after '---'); one experiment per file; remove "
                          "the '---' line, or split the experiments into files",
                          label, m.line + 1, m.column + 1));
}

std::int64_t as_int(const Ctx& c, const Node& n, const std::string& path, std::int64_t example) {
  std::int64_t v = 0;
  bool overflow = false;
  if (!n.IsScalar() || !parse_int(n.Scalar(), v, overflow)) {
    if (overflow) fail_at(c, n, path, fmt::format("{} is too large", n.Scalar()), "use a smaller number");
    fail_at(c, n, path, fmt::format("expected an integer, got {}", describe(n)),
            fmt::format("write a whole number, e.g. '{}: {}'", leaf_of(path), example));
  }
  return v;
}

std::uint64_t as_u64(const Ctx& c, const Node& n, const std::string& path) {
  std::string s = n.IsScalar() ? trim(n.Scalar()) : std::string();
  if (!s.empty() && s[0] == '-') {
    std::int64_t v = 0;
    bool overflow = false;
    if (parse_int(s, v, overflow))
      fail_at(c, n, path, fmt::format("{} is out of range", s), fmt::format("{} must be >= 0", leaf_of(path)));
  }
  std::uint64_t v = 0;
  auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (s.empty() || ec != std::errc() || ptr != s.data() + s.size())
    fail_at(c, n, path, fmt::format("expected a non-negative integer, got {}", describe(n)),
            fmt::format("write a whole number, e.g. '{}: 0'", leaf_of(path)));
  return v;
}

int as_int_in(const Ctx& c, const Node& n, const std::string& path, std::int64_t lo, std::int64_t hi,
              std::int64_t example) {
  std::int64_t v = as_int(c, n, path, example);
  if (v < lo || v > hi) {
    std::string range = hi == std::numeric_limits<int>::max() ? fmt::format("{} must be >= {}", leaf_of(path), lo)
                                                               : fmt::format("{} must be >= {} and <= {}", leaf_of(path), lo, hi);
    fail_at(c, n, path, fmt::format("{} is out of range", v), range);
  }
  return static_cast<int>(v);
}

std::int64_t as_count(const Ctx& c, const Node& n, const std::string& path, std::int64_t lo, std::int64_t example) {
  std::int64_t v = as_int(c, n, path, example);
  if (v < lo) fail_at(c, n, path, fmt::format("{} is out of range", v), fmt::format("{} must be >= {}", leaf_of(path), lo));
  return v;
}

double as_double(const Ctx& c, const Node& n, const std::string& path, double example) {
  double v = 0;
  if (!n.IsScalar() || !parse_double(n.Scalar(), v))
    fail_at(c, n, path, fmt::format("expected a number, got {}", describe(n)),
            fmt::format("write a number, e.g. '{}: {}'", leaf_of(path), format_number(example)));
  return v;
}

bool as_bool(const Ctx& c, const Node& n, const std::string& path) {
  if (n.IsScalar()) {
    std::string s = lower_ascii(trim(n.Scalar()));
    if (s == "true" || s == "yes" || s == "on") return true;
    if (s == "false" || s == "no" || s == "off") return false;
  }
  fail_at(c, n, path, fmt::format("expected true or false, got {}", describe(n)),
          fmt::format("write '{}: true' or '{}: false'", leaf_of(path), leaf_of(path)));
}

std::string as_enum(const Ctx& c, const Node& n, const std::string& path, std::span<const std::string_view> allowed,
                    Aliases aliases) {
  std::string v = as_string(c, n, path);
  if (contains(allowed, v)) return v;
  std::string guess;
  for (auto& [alias, real] : aliases)
    if (lower_ascii(v) == alias) guess = real;
  if (guess.empty()) guess = closest(v, allowed);
  std::string fix = guess.empty() ? fmt::format("use one of {}", join(allowed, "|"))
                                  : fmt::format("did you mean '{}'? (allowed: {})", guess, join(allowed, "|"));
  fail_at(c, n, path, fmt::format("'{}' is not allowed", v), fix);
}

std::string as_device(const Ctx& c, const Node& n, const std::string& path) {
  std::string v = as_string(c, n, path);
  if (!ranges::is_device_name(v)) fail_at(c, n, path, fmt::format("'{}' is not a valid device", v), ranges::kDeviceFix);
  return v;
}

// ${VAR} and ${VAR:-default} expansion for paths.
std::string expand_env(const Ctx& c, const Node& n, const std::string& path, const std::string& s) {
  std::string out;
  for (size_t i = 0; i < s.size();) {
    if (s[i] != '$' || i + 1 >= s.size() || s[i + 1] != '{') {
      out += s[i++];
      continue;
    }
    size_t close = s.find('}', i + 2);
    if (close == std::string::npos)
      fail_at(c, n, path, fmt::format("unterminated '${{' in '{}'", s), "close it: ${NAME} or ${NAME:-default}");
    std::string inner = s.substr(i + 2, close - i - 2);
    std::string var = inner, fallback;
    bool has_fallback = false;
    if (auto sep = inner.find(":-"); sep != std::string::npos) {
      var = inner.substr(0, sep), fallback = inner.substr(sep + 2), has_fallback = true;
    }
    bool ok_name = !var.empty() && !std::isdigit(static_cast<unsigned char>(var[0])) &&
                   std::all_of(var.begin(), var.end(), [](char ch) { return std::isalnum(static_cast<unsigned char>(ch)) || ch == '_'; });
    if (!ok_name) fail_at(c, n, path, fmt::format("'${{{}}}' is not a valid variable reference", inner), "write ${NAME} or ${NAME:-default}");
    const char* value = std::getenv(var.c_str());
    if (value && *value)
      out += value;
    else if (has_fallback)
      out += fallback;
    else
      fail_at(c, n, path, fmt::format("environment variable {} is not set", var),
              fmt::format("export {}=... or write the path directly (or ${{{}:-default}})", var, var));
    i = close + 1;
  }
  return out;
}

// Env-expanded path; relative paths resolve against the YAML file's directory, or the working
// directory when the value came from --set.
std::string as_path(const Ctx& c, const Node& n, const std::string& path) {
  std::string s = expand_env(c, n, path, as_string(c, n, path));
  if (s.empty()) return s;
  fs::path p(s);
  if (p.is_relative()) {
    if (from_override(n))
      p = fs::current_path() / p;
    else if (!c.base_dir.empty())
      p = c.base_dir / p;
  }
  return p.lexically_normal().string();
}

std::vector<std::string> as_string_list(const Ctx& c, const Node& n, const std::string& path, bool allow_scalar) {
  std::vector<std::string> out;
  if (allow_scalar && n.IsScalar()) return {as_string(c, n, path)};
  if (!n.IsSequence())
    fail_at(c, n, path, fmt::format("expected a list of strings, got {}", describe(n)),
            fmt::format("write e.g. '{}: [a, b]'", leaf_of(path)));
  for (size_t i = 0; i < n.size(); ++i) out.push_back(as_string(c, n[i], fmt::format("{}.{}", path, i)));
  return out;
}

// ---------------------------------------------------------------- marks and output

Node strip_marks(const Node& n) {
  switch (n.Type()) {
    case YAML::NodeType::Scalar: return Node(n.Scalar());
    case YAML::NodeType::Sequence: {
      Node out(YAML::NodeType::Sequence);
      for (const auto& e : n) out.push_back(strip_marks(e));
      return out;
    }
    case YAML::NodeType::Map: {
      Node out(YAML::NodeType::Map);
      for (auto it = n.begin(); it != n.end(); ++it) out[strip_marks(it->first)] = strip_marks(it->second);
      return out;
    }
    default: return Node(YAML::NodeType::Null);
  }
}

// Plain scalars that a YAML reader would take as something other than a string get quotes.
void emit_str(YAML::Emitter& e, const std::string& s) {
  double d;
  std::string l = lower_ascii(s);
  bool ambiguous = s.empty() || parse_double(s, d) || l == "true" || l == "false" || l == "yes" || l == "no" || l == "on" ||
                   l == "off" || l == "null" || l == "~" || s != trim(s);
  if (ambiguous) e << YAML::DoubleQuoted;
  e << s;
}

}  // namespace ears::config::detail
