// safetensors (weights from outside privdiff: diffusers folders, CompVis checkpoints converted by
// scripts/): any bytes are either a file whose every tensor reads back with the size its header
// promises, or refused with std::runtime_error naming the file. The header length is checked
// against the file before anything is allocated (libFuzzer's -rss_limit_mb catches the opposite).
#include <privdiff/io/safetensors.hpp>

#include <ATen/ATen.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <unistd.h>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* bytes, std::size_t size) {
  static const std::string path = "/tmp/privdiff-safetensors-fuzz-" + std::to_string(::getpid()) + ".safetensors";
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) std::abort();
  if (size > 0 && std::fwrite(bytes, 1, size, f) != size) std::abort();
  std::fclose(f);
  try {
    const privdiff::sdk::SafetensorsFile file(path);
    for (const auto& e : file.entries()) {
      try {
        const at::Tensor t = file.tensor(e.name);
        if (static_cast<std::uint64_t>(t.nbytes()) != e.end - e.begin) std::abort();
        (void)t.sum();  // touches every byte the header promised
      } catch (const std::runtime_error&) {  // a dtype LibTorch lacks
      }
    }
  } catch (const std::runtime_error&) {
  }
  return 0;
}
