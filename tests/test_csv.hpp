#pragma once
// Reads the reference tables in tests/fixtures (plain CSV with a header row, no quoting).

#include <fstream>
#include <map>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace privdiff::testing {

using CsvRow = std::map<std::string, std::string>;

inline std::vector<CsvRow> read_csv(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw std::runtime_error("cannot read " + path);
  auto split = [](const std::string& line) {
    std::vector<std::string> cells;
    std::istringstream s(line);
    std::string cell;
    while (std::getline(s, cell, ',')) cells.push_back(cell);
    return cells;
  };
  std::string line;
  auto next_line = [&]() {
    if (!std::getline(in, line)) return false;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    return true;
  };
  next_line();
  const auto header = split(line);
  std::vector<CsvRow> rows;
  while (next_line()) {
    if (line.empty() || line[0] == '#') continue;
    const auto cells = split(line);
    if (cells.size() != header.size()) throw std::runtime_error(path + ": ragged row: " + line);
    CsvRow row;
    for (std::size_t i = 0; i < cells.size(); ++i) row[header[i]] = cells[i];
    rows.push_back(row);
  }
  return rows;
}

inline double num(const CsvRow& row, const std::string& key) { return std::stod(row.at(key)); }

}  // namespace privdiff::testing
