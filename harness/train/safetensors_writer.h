// Torch-free safetensors writer: name -> (dtype string, shape, raw little-endian bytes) -> a file
// in the layout ../shared/fixtures/README.md describes (and decoders/safetensors_header.h reads):
// u64 header length N, N bytes of JSON padded with spaces so that 8 + N is a multiple of 8,
// then the tensors back to back in sorted-name order. Header:
//   {"__metadata__": {...}, name: {"dtype", "shape", "data_offsets": [begin, end]}}.
// Tensor -> bytes conversion for at::Tensor lives with the training code (harness/train/checkpoint_writer.h).
#pragma once
#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

namespace ears {

struct SafetensorsBlob {
  std::string dtype;           // a name decoders/safetensors_header.h knows: F64 F32 F16 BF16 ...
  std::vector<int64_t> shape;  // [] for a scalar
  std::string bytes;           // numel * element size raw little-endian bytes
};

// Sorted by name (std::map), which is also the data order in the file.
using SafetensorsBlobs = std::map<std::string, SafetensorsBlob>;

// Bytes per element of a dtype string; throws ears::Error for an unknown dtype.
uint64_t safetensors_element_size(const std::string& dtype);

// The whole file as bytes. Throws ears::Error naming the tensor when its byte count does not
// match its shape and dtype, or a name is empty / "__metadata__".
std::string safetensors_serialize(const SafetensorsBlobs& tensors,
                                  const std::map<std::string, std::string>& metadata = {{"format", "pt"}});

// Writes safetensors_serialize(...) to `file` (write_file_atomic: a reader never sees a partial
// file). Throws ears::Error naming the file on I/O failure.
void write_safetensors(const std::filesystem::path& file, const SafetensorsBlobs& tensors,
                       const std::map<std::string, std::string>& metadata = {{"format", "pt"}});

}  // namespace ears
