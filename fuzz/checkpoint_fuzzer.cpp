// checkpoint.pt (what `--resume`, `init_from` and `privdiff sample` read): any bytes either load
// into the model or are refused with std::runtime_error naming the file. Anything else (a crash,
// another exception type, a sanitizer report) is a finding. LibTorch's zip/pickle reader is not
// instrumented here, only our code around it; a crash inside LibTorch still shows up as a crash.
//
// The seed corpus is a real checkpoint of this harness's model, written by the same save code:
//   PRIVDIFF_FUZZ_WRITE_SEED=tests/fixtures/fuzz/checkpoint/tiny.pt build-fuzz/checkpoint_fuzzer
#include "../tests/fixtures/models/tiny_checkpoint_model.hpp"
#include "run/run_checkpoint.hpp"

#include <torch/serialize/output-archive.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <unistd.h>

namespace {

using namespace privdiff;

using TinyModel = test::TinyCheckpointModel;

void write_seed(const char* path) {
  TinyModel model;
  core::CheckpointPosition position;
  position.stage = 1;
  position.step = 7;
  position.recipe_sha = core::content_hash("[run]\n");
  position.ledger_json = R"({"version":1,"events":[]})";
  position.noise_multipliers = {1.5};
  position.data_fingerprint = "fmnist:60000:0123";
  core::save_checkpoint(path, position, model, [](torch::serialize::OutputArchive& state) {
    state.write("step", c10::IValue(std::int64_t{7}));
    state.write("ema", torch::ones({2}));
  });
}

}  // namespace

// LibTorch 1.13's PyTorchStreamReader::init throws when miniz cannot open the archive without
// releasing miniz's reader state (~1.5 KB per refused file, upstream, not ours): suppressed by name,
// which needs the slow unwinder (LibTorch is built without frame pointers).
extern "C" const char* __lsan_default_suppressions() { return "leak:PyTorchStreamReader::init\n"; }
extern "C" const char* __asan_default_options() { return "fast_unwind_on_malloc=0"; }

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  if (const char* seed = std::getenv("PRIVDIFF_FUZZ_WRITE_SEED")) {
    write_seed(seed);
    std::exit(0);
  }
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* bytes, std::size_t size) {
  static const std::string path = "/tmp/privdiff-checkpoint-fuzz-" + std::to_string(::getpid()) + ".pt";
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) std::abort();
  if (size > 0 && std::fwrite(bytes, 1, size, f) != size) std::abort();
  std::fclose(f);
  TinyModel model;
  try {
    (void)core::load_checkpoint(path, model);
  } catch (const std::runtime_error&) {
  }
  try {
    (void)core::read_checkpoint_ledger(path);
  } catch (const std::runtime_error&) {
  }
  try {
    core::load_initial_weights(path, model);
  } catch (const std::runtime_error&) {
  }
  return 0;
}
