// checkpoint_diff A B [REGEX]: the largest absolute difference between the model weights of two
// checkpoints (every tensor under "model", matched by name; with REGEX only those whose dotted name
// it matches, "!REGEX" those it does not), printed as one number; exit 1 when their names or shapes
// differ. For the end-to-end tests (1 vs 2 processes give one model; frozen parts stay bit-identical).
#include "run/run_checkpoint.hpp"

#include <ATen/ATen.h>

#include <algorithm>
#include <iostream>
#include <map>
#include <regex>
#include <string>

namespace {

using Tensors = std::map<std::string, at::Tensor>;

void collect(torch::serialize::InputArchive& archive, const std::string& prefix, Tensors& out) {
  for (const auto& key : archive.keys()) {
    at::Tensor tensor;
    if (archive.try_read(key, tensor) || archive.try_read(key, tensor, /*is_buffer=*/true)) {
      out[prefix + key] = tensor;
      continue;
    }
    torch::serialize::InputArchive child;
    if (archive.try_read(key, child)) collect(child, prefix + key + ".", out);
  }
}

Tensors model_tensors(const std::string& path) {
  torch::serialize::InputArchive archive = privdiff::core::open_checkpoint_archive(path, c10::Device(c10::kCPU));
  torch::serialize::InputArchive model;
  if (!archive.try_read("model", model)) throw std::runtime_error(path + ": no model");
  Tensors out;
  collect(model, "", out);
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3 && argc != 4) {
    std::cerr << "usage: checkpoint_diff A B [REGEX | !REGEX]\n";
    return 2;
  }
  try {
    const Tensors a = model_tensors(argv[1]), b = model_tensors(argv[2]);
    const std::string filter = argc == 4 ? argv[3] : "";
    const bool exclude = !filter.empty() && filter[0] == '!';
    const std::regex pattern(exclude ? filter.substr(1) : filter);
    double largest = 0;
    std::size_t compared = 0;
    for (const auto& [name, tensor] : a) {
      const auto other = b.find(name);
      if (other == b.end() || !other->second.sizes().equals(tensor.sizes())) {
        std::cerr << name << ": missing or of another shape in " << argv[2] << "\n";
        return 1;
      }
      if (!filter.empty() && std::regex_search(name, pattern) == exclude) continue;
      ++compared;
      largest = std::max(largest, (tensor.to(at::kDouble) - other->second.to(at::kDouble)).abs().max().item<double>());
    }
    if (compared == 0) {
      std::cerr << "no tensor matches " << filter << "\n";
      return 1;
    }
    if (a.size() != b.size()) {
      std::cerr << argv[2] << " has tensors " << argv[1] << " lacks\n";
      return 1;
    }
    std::cout << largest << "\n";
  } catch (const std::exception& e) {
    std::cerr << e.what() << "\n";
    return 2;
  }
  return 0;
}
