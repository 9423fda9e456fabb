#include "harness/train/safetensors_writer.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "decoders/safetensors_header.h"
#include "harness/base/error.h"
#include "harness/base/files.h"

namespace ears {

uint64_t safetensors_element_size(const std::string& dtype) {
  if (const auto d = safetensors_dtype_from_name(dtype)) return safetensors_dtype_size(*d);
  std::vector<std::string> names = safetensors_dtype_names();
  const std::string last = names.back();
  names.pop_back();
  fail("safetensors writer: dtype '{}' is not supported (use {} or {})", dtype, fmt::join(names, ", "), last);
}

std::string safetensors_serialize(const SafetensorsBlobs& tensors, const std::map<std::string, std::string>& metadata) {
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  if (!metadata.empty()) {
    nlohmann::ordered_json meta = nlohmann::ordered_json::object();
    for (const auto& [k, v] : metadata) meta[k] = v;
    header["__metadata__"] = std::move(meta);
  }
  uint64_t offset = 0;
  for (const auto& [name, t] : tensors) {
    if (name.empty() || name == "__metadata__")
      fail("safetensors writer: invalid tensor name '{}'", name);
    uint64_t numel = 1;
    for (int64_t d : t.shape) {
      if (d < 0) fail("safetensors writer: tensor '{}' has a negative dimension {}", name, d);
      numel *= static_cast<uint64_t>(d);
    }
    const uint64_t want = numel * safetensors_element_size(t.dtype);
    if (t.bytes.size() != want)
      fail("safetensors writer: tensor '{}' ({} with {} elements) needs {} bytes but {} were given", name, t.dtype,
           numel, want, t.bytes.size());
    nlohmann::ordered_json e;
    e["dtype"] = t.dtype;
    e["shape"] = t.shape;
    e["data_offsets"] = {offset, offset + want};
    header[name] = std::move(e);
    offset += want;
  }
  std::string json = header.dump();
  while ((8 + json.size()) % 8 != 0) json.push_back(' ');
  std::string out;
  out.reserve(8 + json.size() + offset);
  const uint64_t n = json.size();
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>((n >> (8 * i)) & 0xFF));
  out += json;
  for (const auto& [name, t] : tensors) out += t.bytes;
  return out;
}

void write_safetensors(const std::filesystem::path& file, const SafetensorsBlobs& tensors,
                       const std::map<std::string, std::string>& metadata) {
  write_file_atomic(file, safetensors_serialize(tensors, metadata));
}

}  // namespace ears
