// Torch-free parser and validator for the safetensors file header.
//
// Layout: 8-byte little-endian u64 N, N bytes of UTF-8 JSON
//   {"__metadata__": {string: string}, name: {"dtype", "shape", "data_offsets": [begin, end]}}
// then the raw little-endian tensor data; offsets are relative to the data section (8 + N).
// parse_safetensors_header() checks everything a loader relies on (sizes, dtypes, shapes,
// spans inside the file, no overlaps, no integer overflow) and throws one ears::Error naming
// the file, the tensor and the fix on the first problem.
#pragma once
#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace ears {

enum class SafetensorsDtype { F64, F32, F16, BF16, I64, I32, I16, I8, U8, BOOL };

const char* safetensors_dtype_name(SafetensorsDtype dtype);   // "F32", "BF16", ...
uint64_t safetensors_dtype_size(SafetensorsDtype dtype);      // bytes per element (BOOL = 1)
// Parses a supported dtype name; std::nullopt for anything else.
std::optional<SafetensorsDtype> safetensors_dtype_from_name(const std::string& name);
// Every supported dtype's name, in the table's order: F64 F32 F16 BF16 I64 I32 I16 I8 U8 BOOL.
std::vector<std::string> safetensors_dtype_names();

struct SafetensorsTensor {
  std::string name;
  SafetensorsDtype dtype;
  std::vector<int64_t> shape;  // [] for a scalar
  uint64_t begin = 0;          // absolute byte offsets in the file: [begin, end)
  uint64_t end = 0;
  uint64_t numel() const;
  uint64_t nbytes() const { return end - begin; }
};

struct SafetensorsHeader {
  uint64_t header_size = 0;   // N
  uint64_t data_offset = 0;   // 8 + N
  std::vector<SafetensorsTensor> tensors;        // sorted by name
  std::map<std::string, std::string> metadata;   // "__metadata__" (non-string values kept as JSON text)
  const SafetensorsTensor* find(const std::string& name) const;  // nullptr when absent
};

// `bytes` must hold at least the first min(file_size, 8 + N) bytes of the file (a mapping of the
// whole file is fine); `file_size` is the real size of the file, used to check every data span.
// `file_name` is only used in error messages.
SafetensorsHeader parse_safetensors_header(const uint8_t* bytes, uint64_t file_size,
                                           const std::string& file_name);

// The header's JSON text as stored, unparsed and unvalidated (for fingerprints, not for loading):
// the first min(N, max_bytes) bytes after the u64 length N. Bytes a short or unreadable file
// does not have read as '\0' (an unreadable file gives "").
std::string read_safetensors_header_bytes(const std::filesystem::path& path, uint64_t max_bytes);

}  // namespace ears
