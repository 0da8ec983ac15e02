// How long the near-duplicate check of [run] init_from_disjoint takes on real data, and the most
// similar pair it finds (which tells whether its threshold refuses distinct records): two IDX
// image files, e.g. Fashion-MNIST's training and test images.
//   near_duplicate_bench A-images-idx3-ubyte.gz B-images-idx3-ubyte.gz [THRESHOLD]
#include "data/near_duplicates.hpp"

#include <privdiff/data/idx_file.hpp>
#include <privdiff/data/image_dataset.hpp>

#include <ATen/ATen.h>

#include <chrono>
#include <cstdlib>
#include <iostream>

using namespace privdiff;

namespace {

std::unique_ptr<sdk::ImageDataset> open_images(const char* file) {
  const sdk::IdxArray idx = sdk::read_idx(file);
  std::vector<std::int64_t> shape = idx.shape;
  if (shape.size() == 3) shape.insert(shape.begin() + 1, 1);
  const at::Tensor bytes = at::from_blob(const_cast<std::uint8_t*>(idx.data.data()), shape, at::kByte).clone();
  return std::make_unique<sdk::ImageDataset>(sdk::LabelledBytes{bytes, at::zeros({shape[0]}, at::kLong), 1}, false, file);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3 || argc > 4) {
    std::cerr << "usage: near_duplicate_bench A_IMAGES B_IMAGES [THRESHOLD]\n";
    return 2;
  }
  try {
    const auto a = open_images(argv[1]), b = open_images(argv[2]);
    for (const double threshold : {argc == 4 ? std::atof(argv[3]) : 0.9, core::near_duplicate_threshold}) {
      const auto start = std::chrono::steady_clock::now();
      const auto pair = core::find_near_duplicate(*a, *b, threshold, &std::cout);
      const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      std::cout << a->size() << " x " << b->size() << " records, threshold " << threshold << ": " << seconds << " s; ";
      if (pair) {
        std::cout << "most similar pair " << pair->first << " / " << pair->second << ": " << pair->how() << "\n";
      } else {
        std::cout << "no pair at or above the threshold\n";
      }
    }
  } catch (const std::exception& e) {
    std::cerr << "near_duplicate_bench: " << e.what() << "\n";
    return 2;
  }
  return 0;
}
