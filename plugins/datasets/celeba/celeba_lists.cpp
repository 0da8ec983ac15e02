#include "celeba_lists.hpp"

#include <fstream>
#include <stdexcept>

namespace privdiff::plugins::celeba {

namespace fs = std::filesystem;

namespace {

// Whitespace-separated fields: the attribute list aligns its columns with runs of spaces.
std::vector<std::string> fields(const std::string& line) {
  std::vector<std::string> out;
  std::size_t i = 0;
  while (i < line.size()) {
    while (i < line.size() && (line[i] == ' ' || line[i] == '\t' || line[i] == '\r')) ++i;
    const std::size_t start = i;
    while (i < line.size() && line[i] != ' ' && line[i] != '\t' && line[i] != '\r') ++i;
    if (i > start) out.push_back(line.substr(start, i - start));
  }
  return out;
}

// std::getline without a Windows line end, so quoted lines print cleanly.
bool next_line(std::istream& in, std::string& line) {
  if (!std::getline(in, line)) return false;
  if (!line.empty() && line.back() == '\r') line.pop_back();
  return true;
}

std::ifstream open(const fs::path& file) {
  std::ifstream in(file);
  if (!in) throw std::runtime_error(file.string() + ": cannot be opened");
  return in;
}

std::runtime_error line_error(const fs::path& file, std::size_t line, const std::string& why) {
  return std::runtime_error(file.string() + ":" + std::to_string(line) + ": " + why);
}

std::string joined(const std::vector<std::string>& names) {
  std::string out;
  for (const auto& n : names) out += (out.empty() ? "" : ", ") + n;
  return out;
}

}  // namespace

AttributeTable read_attributes(const fs::path& file) {
  std::ifstream in = open(file);
  std::string line;
  if (!next_line(in, line)) throw line_error(file, 1, "empty file; expected the image count");
  const std::vector<std::string> count_fields = fields(line);
  std::size_t parsed = 0;
  long long count = -1;
  try {
    if (count_fields.size() == 1) count = std::stoll(count_fields[0], &parsed);
  } catch (const std::exception&) {
  }
  if (count < 0 || parsed != count_fields[0].size()) throw line_error(file, 1, "expected the image count, found '" + line + "'");
  if (!next_line(in, line)) throw line_error(file, 2, "missing; expected the attribute names");
  AttributeTable table;
  table.file = file;
  table.names = fields(line);
  std::size_t number = 2, records = 0;
  while (next_line(in, line)) {
    ++number;
    const std::vector<std::string> f = fields(line);
    if (f.empty()) continue;
    if (f.size() != table.names.size() + 1) {
      throw line_error(file, number, "expected an image name and " + std::to_string(table.names.size()) +
                                         " values, found " + std::to_string(f.size()) + " fields");
    }
    std::vector<bool> values(table.names.size());
    for (std::size_t k = 1; k < f.size(); ++k) {
      if (f[k] != "1" && f[k] != "-1") {
        throw line_error(file, number, "expected 1 or -1 for " + table.names[k - 1] + ", found '" + f[k] + "'");
      }
      values[k - 1] = f[k] == "1";
    }
    table.images[f[0]] = std::move(values);
    ++records;
  }
  if (records != static_cast<std::size_t>(count)) {
    throw line_error(file, 1, "announces " + std::to_string(count) + " images but the file lists " +
                                  std::to_string(records) + " (an incomplete download?)");
  }
  return table;
}

std::size_t AttributeTable::column(const std::string& attribute) const {
  for (std::size_t k = 0; k < names.size(); ++k) {
    if (names[k] == attribute) return k;
  }
  throw line_error(file, 2, "no attribute '" + attribute + "'; the file names " + joined(names));
}

std::vector<std::string> read_partition(const fs::path& file, int partition) {
  std::ifstream in = open(file);
  std::vector<std::string> names;
  std::string line;
  for (std::size_t number = 1; next_line(in, line); ++number) {
    const std::vector<std::string> f = fields(line);
    if (f.empty()) continue;
    if (f.size() != 2 || (f[1] != "0" && f[1] != "1" && f[1] != "2")) {
      throw line_error(file, number, "expected '<image>.jpg 0|1|2' (train, valid, test), found '" + line + "'");
    }
    if (f[1][0] - '0' == partition) names.push_back(f[0]);
  }
  return names;
}

}  // namespace privdiff::plugins::celeba
