#include "decoders/safetensors_header.h"

#include <algorithm>
#include <fstream>
#include <limits>
#include <set>
#include <utility>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "harness/base/error.h"

namespace ears {
namespace {

using json = nlohmann::json;

struct DtypeInfo {
  SafetensorsDtype dtype;
  const char* name;
  uint64_t size;
};

constexpr DtypeInfo kDtypes[] = {
    {SafetensorsDtype::F64, "F64", 8},  {SafetensorsDtype::F32, "F32", 4},
    {SafetensorsDtype::F16, "F16", 2},  {SafetensorsDtype::BF16, "BF16", 2},
    {SafetensorsDtype::I64, "I64", 8},  {SafetensorsDtype::I32, "I32", 4},
    {SafetensorsDtype::I16, "I16", 2},  {SafetensorsDtype::I8, "I8", 1},
    {SafetensorsDtype::U8, "U8", 1},    {SafetensorsDtype::BOOL, "BOOL", 1},
};

// Dtypes the safetensors format defines but this loader does not handle.
constexpr const char* kUnsupportedDtypes[] = {"F8_E4M3", "F8_E5M2", "F8_E8M0", "F6_E2M3", "F6_E3M2",
                                              "F4",      "U16",     "U32",     "U64",     "C64"};

// "F64 F32 ... BOOL", for messages.
const std::string& supported_list() {
  static const std::string list = fmt::format("{}", fmt::join(safetensors_dtype_names(), " "));
  return list;
}

const DtypeInfo& info(SafetensorsDtype dtype) {
  for (const auto& d : kDtypes)
    if (d.dtype == dtype) return d;
  return kDtypes[1];  // unreachable: every enumerator is in the table
}

std::string one_line(std::string s) {
  std::replace(s.begin(), s.end(), '\n', ' ');
  std::replace(s.begin(), s.end(), '\r', ' ');
  return s;
}

// A JSON value as a short one-line string for error messages.
std::string brief(const json& j) {
  std::string s = one_line(j.dump());
  if (s.size() > 60) s = s.substr(0, 57) + "...";
  return s;
}

// Non-negative JSON integer that fits in int64, or nullopt.
std::optional<uint64_t> as_index(const json& j) {
  if (j.is_number_unsigned()) {
    uint64_t v = j.get<uint64_t>();
    if (v <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) return v;
    return std::nullopt;
  }
  if (j.is_number_integer()) {
    int64_t v = j.get<int64_t>();
    if (v >= 0) return static_cast<uint64_t>(v);
  }
  return std::nullopt;
}

// The entry's "dtype": a supported name; an unsupported or unknown one fails naming the tensor.
SafetensorsDtype parse_entry_dtype(const std::string& file, const std::string& name, const json& dtype) {
  if (!dtype.is_string())
    fail("{}: tensor '{}': dtype is {} instead of a string such as \"F32\"; the file is corrupt", file,
         name, brief(dtype));
  const std::string dtype_name = dtype.get<std::string>();
  auto parsed = safetensors_dtype_from_name(dtype_name);
  if (!parsed) {
    bool known = std::any_of(std::begin(kUnsupportedDtypes), std::end(kUnsupportedDtypes),
                             [&](const char* d) { return dtype_name == d; });
    if (known)
      fail("{}: unsupported dtype {} for tensor '{}' (supported: {}); convert the checkpoint, e.g. to BF16 "
           "or F32",
           file, dtype_name, name, supported_list());
    fail("{}: unknown dtype '{}' for tensor '{}' (expected one of {}); the file is corrupt or not a "
         "safetensors file",
         file, one_line(dtype_name), name, supported_list());
  }
  return *parsed;
}

// The entry's "shape" into t.shape; returns the tensor's byte count (shape x element size),
// failing when it overflows 64 bits.
uint64_t parse_entry_shape(const std::string& file, const std::string& name, const json& shape,
                           SafetensorsTensor& t) {
  if (!shape.is_array())
    fail("{}: tensor '{}': shape is {} instead of an array of non-negative integers; the file is corrupt",
         file, name, brief(shape));
  uint64_t numel = 1;
  bool overflow = false;
  for (const json& d : shape) {
    auto v = as_index(d);
    if (!v)
      fail("{}: tensor '{}': shape {} has entry {} which is not a non-negative integer; the file is corrupt",
           file, name, brief(shape), brief(d));
    t.shape.push_back(static_cast<int64_t>(*v));
    overflow = overflow || __builtin_mul_overflow(numel, *v, &numel);
  }
  uint64_t nbytes = 0;
  overflow = overflow || __builtin_mul_overflow(numel, info(t.dtype).size, &nbytes);
  if (overflow)
    fail("{}: tensor '{}': shape {} x {} bytes overflows 64 bits; the file is corrupt", file, name,
         fmt::format("{}", t.shape), info(t.dtype).size);
  return nbytes;
}

// The entry's "data_offsets" [begin, end] into t.begin / t.end (absolute): they must span
// `nbytes` and lie inside the data section.
void parse_entry_offsets(const std::string& file, const std::string& name, const json& offsets,
                         uint64_t nbytes, uint64_t data_offset, uint64_t file_size, SafetensorsTensor& t) {
  std::optional<uint64_t> begin, end;
  if (offsets.is_array() && offsets.size() == 2) {
    begin = as_index(offsets[0]);
    end = as_index(offsets[1]);
  }
  if (!begin || !end)
    fail("{}: tensor '{}': data_offsets is {} instead of two non-negative integers [begin, end]; the file "
         "is corrupt",
         file, name, brief(offsets));
  if (*begin > *end)
    fail("{}: tensor '{}': data_offsets [{}, {}] has begin > end; the file is corrupt, re-download it", file,
         name, *begin, *end);
  if (*end - *begin != nbytes)
    fail("{}: tensor '{}': shape {} x {} ({} bytes/element) needs {} bytes but data_offsets [{}, {}] span "
         "{}; the header is corrupt, re-download or re-export the file",
         file, name, fmt::format("{}", t.shape), safetensors_dtype_name(t.dtype), info(t.dtype).size, nbytes,
         *begin, *end, *end - *begin);
  const uint64_t data_size = file_size - data_offset;  // data_offset <= file_size checked by caller
  if (*end > data_size)
    fail("{}: tensor '{}': data_offsets [{}, {}] reach past the {}-byte data section (file is {} bytes): "
         "offsets past the end of file: file truncated? re-download it",
         file, name, *begin, *end, data_size, file_size);
  t.begin = data_offset + *begin;
  t.end = data_offset + *end;
}

SafetensorsTensor parse_entry(const std::string& file, const std::string& key, const json& entry,
                              uint64_t data_offset, uint64_t file_size) {
  const std::string name = one_line(key);  // as shown in messages
  if (!entry.is_object())
    fail("{}: tensor '{}': header entry is {} instead of an object with dtype/shape/data_offsets; "
         "the file is corrupt, re-download or re-export it",
         file, name, brief(entry));
  for (const char* key : {"dtype", "shape", "data_offsets"})
    if (!entry.contains(key))
      fail("{}: tensor '{}': header entry has no \"{}\"; the file is corrupt, re-download or re-export it",
           file, name, key);
  SafetensorsTensor t;
  t.name = key;
  t.dtype = parse_entry_dtype(file, name, entry["dtype"]);
  const uint64_t nbytes = parse_entry_shape(file, name, entry["shape"], t);
  parse_entry_offsets(file, name, entry["data_offsets"], nbytes, data_offset, file_size, t);
  return t;
}

}  // namespace

const char* safetensors_dtype_name(SafetensorsDtype dtype) { return info(dtype).name; }

uint64_t safetensors_dtype_size(SafetensorsDtype dtype) { return info(dtype).size; }

std::optional<SafetensorsDtype> safetensors_dtype_from_name(const std::string& name) {
  for (const auto& d : kDtypes)
    if (name == d.name) return d.dtype;
  return std::nullopt;
}

std::vector<std::string> safetensors_dtype_names() {
  std::vector<std::string> names;
  for (const auto& d : kDtypes) names.emplace_back(d.name);
  return names;
}

uint64_t SafetensorsTensor::numel() const {
  uint64_t n = 1;
  for (int64_t d : shape) n *= static_cast<uint64_t>(d);
  return n;
}

const SafetensorsTensor* SafetensorsHeader::find(const std::string& name) const {
  auto it = std::lower_bound(tensors.begin(), tensors.end(), name,
                             [](const SafetensorsTensor& t, const std::string& n) { return t.name < n; });
  return it != tensors.end() && it->name == name ? &*it : nullptr;
}

namespace {

// The header's JSON object; a top-level name that appears twice is an error (nlohmann would
// silently keep the last one).
json parse_header_json(const uint8_t* bytes, uint64_t n, const std::string& file) {
  std::set<std::string> seen;
  std::string duplicate;
  auto callback = [&](int depth, json::parse_event_t event, json& parsed) {
    if (event == json::parse_event_t::key && depth == 1 && duplicate.empty() &&
        !seen.insert(parsed.get<std::string>()).second)
      duplicate = parsed.get<std::string>();
    return true;
  };
  json root;
  try {
    const char* begin = reinterpret_cast<const char*>(bytes + 8);
    root = json::parse(begin, begin + n, callback);
  } catch (const json::exception& e) {
    fail("{}: the {}-byte safetensors header is not valid JSON ({}); the file is corrupt or not a "
         "safetensors file, re-download it",
         file, n, one_line(e.what()));
  }
  if (!root.is_object())
    fail("{}: the safetensors header is {} instead of a JSON object; the file is corrupt or not a "
         "safetensors file",
         file, brief(root));
  if (!duplicate.empty())
    fail("{}: tensor '{}' appears twice in the safetensors header; the file is corrupt, re-export it", file,
         one_line(duplicate));
  return root;
}

// Spans must not overlap: walk them by start offset, remembering the furthest end so far.
void check_no_overlap(const SafetensorsHeader& header, const std::string& file) {
  std::vector<const SafetensorsTensor*> by_offset;
  for (const auto& t : header.tensors) by_offset.push_back(&t);
  std::sort(by_offset.begin(), by_offset.end(), [](const SafetensorsTensor* a, const SafetensorsTensor* b) {
    return std::pair(a->begin, a->end) < std::pair(b->begin, b->end);
  });
  const SafetensorsTensor* furthest = nullptr;
  const uint64_t base = header.data_offset;
  for (const SafetensorsTensor* t : by_offset) {
    if (furthest && t->begin < furthest->end && t->begin < t->end)
      fail("{}: tensors '{}' (data_offsets [{}, {}]) and '{}' (data_offsets [{}, {}]) overlap; the header "
           "is corrupt, re-download or re-export the file",
           file, one_line(furthest->name), furthest->begin - base, furthest->end - base, one_line(t->name),
           t->begin - base, t->end - base);
    if (!furthest || t->end > furthest->end) furthest = t;
  }
}

}  // namespace

SafetensorsHeader parse_safetensors_header(const uint8_t* bytes, uint64_t file_size,
                                           const std::string& file_name) {
  const std::string& file = file_name;
  if (file_size < 8)
    fail("{}: file is {} bytes, shorter than the 8-byte safetensors header length: truncated or not a "
         "safetensors file; re-download it",
         file, file_size);
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | bytes[i];
  if (n > file_size - 8)
    fail("{}: header length {} is larger than the {} bytes that follow it: truncated or not a safetensors "
         "file; re-download it",
         file, n, file_size - 8);

  SafetensorsHeader header;
  header.header_size = n;
  header.data_offset = 8 + n;
  const json root = parse_header_json(bytes, n, file);
  for (const auto& [key, value] : root.items()) {
    if (key == "__metadata__") {
      if (!value.is_object())
        fail("{}: \"__metadata__\" is {} instead of an object of strings; the file is corrupt", file,
             brief(value));
      for (const auto& [mk, mv] : value.items())
        header.metadata[mk] = mv.is_string() ? mv.get<std::string>() : mv.dump();
      continue;
    }
    header.tensors.push_back(parse_entry(file, key, value, header.data_offset, file_size));
  }
  check_no_overlap(header, file);
  std::sort(header.tensors.begin(), header.tensors.end(),
            [](const SafetensorsTensor& a, const SafetensorsTensor& b) { return a.name < b.name; });
  return header;
}

std::string read_safetensors_header_bytes(const std::filesystem::path& path, uint64_t max_bytes) {
  std::ifstream in(path, std::ios::binary);
  unsigned char length[8] = {};
  in.read(reinterpret_cast<char*>(length), 8);
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | length[i];  // little-endian
  std::string header(static_cast<size_t>(std::min(n, max_bytes)), '\0');
  in.read(header.data(), static_cast<std::streamsize>(header.size()));
  return header;
}

}  // namespace ears
