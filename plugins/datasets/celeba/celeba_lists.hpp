#pragma once
// CelebA's two annotation lists, as distributed next to img_align_celeba/:
//   list_attr_celeba.txt    line 1: the image count; line 2: the 40 attribute names; then one
//                           line per image, "000001.jpg -1  1  1 ..." (values -1 or 1, columns
//                           aligned with runs of spaces)
//   list_eval_partition.txt "000001.jpg 0" per image: 0 train, 1 valid, 2 test
// Both are read whole and checked line by line; errors name file:line and what was expected.

#include <filesystem>
#include <string>
#include <unordered_map>
#include <vector>

namespace privdiff::plugins::celeba {

/// The whole attribute list: its attribute names (line 2) and, per image file name, whether each is 1
/// (else -1), in the names' order. Throws std::runtime_error for malformed lines and a wrong count.
struct AttributeTable {
  std::vector<std::string> names;
  std::unordered_map<std::string, std::vector<bool>> images;
  /// The column of `attribute`; std::runtime_error naming the file's attributes when it has none such.
  std::size_t column(const std::string& attribute) const;
  std::filesystem::path file;
};
AttributeTable read_attributes(const std::filesystem::path& file);

/// The image file names of partition 0 (train), 1 (valid) or 2 (test), in file order. Throws
/// std::runtime_error for malformed lines.
std::vector<std::string> read_partition(const std::filesystem::path& file, int partition);

}  // namespace privdiff::plugins::celeba
