// The near-duplicate check (core/data/near_duplicates.hpp) on real data: how long it takes, what it
// finds between two datasets (false alarms, where they hold distinct records), and which changes of a
// record it sees through. Not a timed test: numbers for docs/privacy.md#data-identity.
//   near_duplicate_bench A_IMAGES B_IMAGES [THRESHOLD]
//     e.g. Fashion-MNIST's test (A) against its training images (B): how many records of A have a
//     near-duplicate in B at 0.99, 0.993, THRESHOLD (default: near_duplicate_threshold) and 0.998, the
//     most similar pairs, and the time (of the check at the lowest of them).
//   near_duplicate_bench --changes IMAGES [N]
//     N (default 1,000) records of IMAGES, evenly spread, each changed (shifted, rotated, cropped,
//     padded, resized, noisy, ...) and searched for among all of IMAGES: how many are found, and found
//     as the record they were made from.
#include "bench_arguments.hpp"
#include "../tests/core/image_changes.hpp"

#include "data/near_duplicates.hpp"

#include <privdiff/data/idx_file.hpp>
#include <privdiff/data/image_dataset.hpp>

#include <ATen/ATen.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <iomanip>
#include <iostream>
#include <vector>

using namespace privdiff;

namespace {

at::Tensor read_images(const char* file) {
  const sdk::IdxArray idx = sdk::read_idx(file);
  std::vector<std::int64_t> shape = idx.shape;
  if (shape.size() == 3) shape.insert(shape.begin() + 1, 1);
  return at::from_blob(const_cast<std::uint8_t*>(idx.data.data()), shape, at::kByte).clone();
}

std::unique_ptr<sdk::ImageDataset> dataset(const at::Tensor& bytes, const std::string& name) {
  return std::make_unique<sdk::ImageDataset>(sdk::LabelledBytes{bytes, at::zeros({bytes.size(0)}, at::kLong), 1, {}}, false,
                                             name);
}

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

void compare(const char* a_file, const char* b_file, double threshold) {
  const auto a = dataset(read_images(a_file), a_file), b = dataset(read_images(b_file), b_file);
  const auto start = std::chrono::steady_clock::now();
  const auto pairs = core::find_near_duplicates(*a, *b, std::min(0.99, threshold), &std::cout);
  const double seconds = seconds_since(start);
  std::cout << a->size() << " x " << b->size() << " records: " << std::setprecision(3) << seconds << " s\n";
  for (const double at : {std::min(0.99, threshold), 0.993, threshold, 0.998}) {
    std::int64_t n = 0;
    for (const auto& p : pairs) n += p.correlation >= at ? 1 : 0;
    std::cout << "  records of A with a near-duplicate in B at >= " << at << ": " << n << " ("
              << 100.0 * static_cast<double>(n) / static_cast<double>(a->size()) << "%)\n";
  }
  std::vector<core::NearDuplicate> sorted = pairs;
  std::sort(sorted.begin(), sorted.end(), [](const auto& x, const auto& y) { return x.correlation > y.correlation; });
  for (std::size_t i = 0; i < std::min<std::size_t>(10, sorted.size()); ++i) {
    std::cout << "  " << sorted[i].first << " / " << sorted[i].second << ": " << sorted[i].how() << "\n";
  }
}

struct Change {
  const char* name;
  std::function<at::Tensor(const at::Tensor&)> apply;
};

std::vector<Change> changes() {
  using namespace privdiff::image_changes;
  return {
      {"one grey level up", one_grey_level},
      {"mirror image", [](const at::Tensor& x) { return x.flip(3); }},
      {"shift (2, 0)", [](const at::Tensor& x) { return shifted(x, 2, 0); }},
      {"shift (-2, 2)", [](const at::Tensor& x) { return shifted(x, -2, 2); }},
      {"rotation 3 degrees", [](const at::Tensor& x) { return rotated(x, 3); }},
      {"rotation -7 degrees", [](const at::Tensor& x) { return rotated(x, -7); }},
      {"rotation 10 degrees", [](const at::Tensor& x) { return rotated(x, 10); }},
      {"crop 2 px per side, resized back", [](const at::Tensor& x) { return cropped(x, 2, 2, 2, 2); }},
      {"crop 2 px left and top, resized back", [](const at::Tensor& x) { return cropped(x, 2, 2, 0, 0); }},
      {"padded to 32 x 32", [](const at::Tensor& x) { return padded(x, 32); }},
      {"resized to 32 x 32", [](const at::Tensor& x) { return resized(x, 32); }},
      {"noise sigma 10", [](const at::Tensor& x) { return noisy(x, 10, 1); }},
      {"noise sigma 25", [](const at::Tensor& x) { return noisy(x, 25, 2); }},
      {"shift (1, 1), rotation 5, noise 10", [](const at::Tensor& x) { return noisy(rotated(shifted(x, 1, 1), 5), 10, 3); }},
  };
}

void detect_changes(const char* file, std::int64_t n) {
  const at::Tensor all = read_images(file);
  const auto b = dataset(all, file);
  n = std::min(n, all.size(0));
  const at::Tensor picked = at::arange(n, at::kLong) * (all.size(0) / n);
  const at::Tensor originals = all.index_select(0, picked);
  std::cout << n << " records of " << file << " changed, searched for among all " << all.size(0) << "\n";
  for (const auto& change : changes()) {
    const auto a = dataset(change.apply(originals).contiguous(), change.name);
    const auto start = std::chrono::steady_clock::now();
    const auto pairs = core::find_near_duplicates(*a, *b);
    const double seconds = seconds_since(start);
    std::int64_t right = 0;
    double lowest = 1;
    for (const auto& p : pairs) {
      right += p.second == picked[p.first].item<std::int64_t>() ? 1 : 0;
      lowest = std::min(lowest, p.correlation);
    }
    std::cout << "  " << std::left << std::setw(38) << change.name << " found " << pairs.size() << "/" << n
              << ", as its original " << right << "; lowest correlation " << std::setprecision(4) << lowest << "; "
              << std::setprecision(3) << seconds << " s\n";
  }
}

}  // namespace

int main(int argc, char** argv) {
  try {
    if (argc >= 3 && argc <= 4 && std::strcmp(argv[1], "--changes") == 0) {
      detect_changes(argv[2], argc == 4 ? bench::positive(argv[3], "N") : 1000);
    } else if (argc >= 3 && argc <= 4 && argv[1][0] != '-') {
      compare(argv[1], argv[2], argc == 4 ? std::atof(argv[3]) : core::near_duplicate_threshold);
    } else {
      std::cerr << "usage: near_duplicate_bench A_IMAGES B_IMAGES [THRESHOLD]\n"
                   "       near_duplicate_bench --changes IMAGES [N]\n";
      return 2;
    }
  } catch (const std::exception& e) {
    std::cerr << "near_duplicate_bench: " << e.what() << "\n";
    return 2;
  }
  return 0;
}
