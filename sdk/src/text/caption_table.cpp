// Captions tables (caption_sources.hpp): JSONL through nlohmann-json, CSV through libcsv.
#include <privdiff/text/caption_sources.hpp>

#include "text_file.hpp"

#include <csv.h>
#include <nlohmann/json.hpp>

#include <fstream>
#include <string>
#include <map>
#include <stdexcept>

namespace privdiff::sdk {

namespace fs = std::filesystem;

namespace {

// "./a/b.png" and "a/b.png" name one image.
std::string image_key(std::string path) {
  while (path.rfind("./", 0) == 0) path.erase(0, 2);
  return path;
}

// Adds one row's caption, refusing a repeated image or a bad caption; `first_line` remembers where
// each image was first given.
struct TableBuilder {
  CaptionTable table;
  std::map<std::string, std::size_t> first_line;

  void add(std::string image, const std::string& raw_caption, std::size_t line) {
    image = image_key(std::move(image));
    if (image.empty()) throw text_file::error_at(table.file, line, "an empty file_name");
    const std::string caption = text_file::trimmed(raw_caption);
    if (caption.empty()) throw text_file::error_at(table.file, line, "an empty caption");
    if (const std::string why = caption_problem(caption); !why.empty()) throw text_file::error_at(table.file, line, why);
    const auto [at, fresh] = first_line.emplace(image, line);
    if (!fresh) {
      throw text_file::error_at(table.file, line, "file_name '" + image + "' again (first at line " +
                                                      std::to_string(at->second) + "): one caption per image");
    }
    table.captions.emplace(std::move(image), caption);
  }
};

std::ifstream open_table(const fs::path& file) {
  std::error_code ec;
  if (!fs::is_regular_file(file, ec)) throw std::invalid_argument(file.string() + ": no such file (a captions table)");
  std::ifstream in(file, std::ios::binary);
  if (!in) throw std::invalid_argument(file.string() + ": cannot be opened");
  return in;
}

CaptionTable read_jsonl(const fs::path& file, const std::string& column) {
  std::ifstream in = open_table(file);
  TableBuilder out{{file, {}}, {}};
  std::string text;
  for (std::size_t line = 1; std::getline(in, text); ++line) {
    if (line == 1 && text.rfind("\xEF\xBB\xBF", 0) == 0) text.erase(0, 3);
    if (text.find_first_not_of(" \t\r") == std::string::npos) continue;
    const nlohmann::json row = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
    if (row.is_discarded() || !row.is_object()) throw text_file::error_at(file, line, "not a JSON object");
    for (const std::string& key : {std::string("file_name"), column}) {
      if (!row.contains(key) || !row[key].is_string()) {
        throw text_file::error_at(file, line, "no string '" + key + "' (each row: {\"file_name\": …, \"" + column + "\": …})");
      }
    }
    out.add(row["file_name"].get<std::string>(), row[column].get<std::string>(), line);
  }
  return std::move(out.table);
}

// libcsv's callbacks: fields gather into a row; the header names the two columns; a failure stops
// the parse there (nothing is thrown through the C library) and is rethrown once it returns.
struct CsvState {
  const std::string& column;
  TableBuilder out;
  std::vector<std::string> row;
  std::size_t line = 1, file_column = SIZE_MAX, caption_column = SIZE_MAX;
  bool header_done = false;
  std::string failure;
};

void csv_field(void* data, std::size_t length, void* state) {
  auto& s = *static_cast<CsvState*>(state);
  if (s.failure.empty()) s.row.emplace_back(static_cast<const char*>(data), length);
}

void csv_header(CsvState& s) {
  if (!s.row.empty() && s.row[0].rfind("\xEF\xBB\xBF", 0) == 0) s.row[0].erase(0, 3);
  for (std::size_t k = 0; k < s.row.size(); ++k) {
    if (s.row[k] == "file_name") s.file_column = k;
    if (s.row[k] == s.column) s.caption_column = k;
  }
  if (s.file_column == SIZE_MAX || s.caption_column == SIZE_MAX) {
    s.failure = text_file::error_at(s.out.table.file, s.line, "the header row needs the columns file_name and " +
                                                                  s.column).what();
  }
  s.header_done = true;
}

void csv_row(int, void* state) {
  auto& s = *static_cast<CsvState*>(state);
  if (!s.failure.empty()) return;
  if (!s.header_done) {
    csv_header(s);
  } else if (s.row.size() <= std::max(s.file_column, s.caption_column)) {
    s.failure = text_file::error_at(s.out.table.file, s.line, std::to_string(s.row.size()) +
                                                                  " field(s); the header names more").what();
  } else {
    try {
      s.out.add(s.row[s.file_column], s.row[s.caption_column], s.line);
    } catch (const std::invalid_argument& e) {
      s.failure = e.what();
    }
  }
  s.row.clear();
}

CaptionTable read_csv(const fs::path& file, const std::string& column) {
  std::ifstream in = open_table(file);
  csv_parser parser;
  if (csv_init(&parser, CSV_STRICT | CSV_STRICT_FINI) != 0) throw std::runtime_error("libcsv: cannot initialise");
  struct Free {
    csv_parser* p;
    ~Free() { csv_free(p); }
  } release{&parser};
  CsvState state{column, {{file, {}}, {}}, {}, 1, SIZE_MAX, SIZE_MAX, false, {}};
  std::string text;
  for (; state.failure.empty() && std::getline(in, text); ++state.line) {
    text += '\n';
    if (csv_parse(&parser, text.data(), text.size(), csv_field, csv_row, &state) != text.size()) {
      throw text_file::error_at(file, state.line, std::string("malformed CSV: ") + csv_strerror(csv_error(&parser)));
    }
  }
  if (state.failure.empty() && csv_fini(&parser, csv_field, csv_row, &state) != 0) {
    throw text_file::error_at(file, state.line - 1, std::string("malformed CSV: ") + csv_strerror(csv_error(&parser)));
  }
  if (!state.failure.empty()) throw std::invalid_argument(state.failure);
  if (!state.header_done) throw std::invalid_argument(file.string() + ": empty (expected a header row: file_name," + column + ")");
  return std::move(state.out.table);
}

}  // namespace

CaptionTable read_caption_table(const fs::path& file, const std::string& column) {
  const std::string ext = file.extension().string();
  if (ext == ".jsonl") return read_jsonl(file, column);
  if (ext == ".csv") return read_csv(file, column);
  throw std::invalid_argument(file.string() + ": a captions table is a .jsonl or a .csv file (Hugging Face's "
                              "imagefolder metadata: file_name and a caption column)");
}

std::vector<std::string> CaptionTable::for_images(const std::vector<std::string>& images) const {
  std::vector<std::string> out, missing;
  std::size_t unmatched = 0;
  for (const std::string& image : images) {
    const auto found = captions.find(image_key(image));
    if (found != captions.end()) {
      out.push_back(found->second);
    } else if (++unmatched <= 3) {
      missing.push_back(image);
    }
  }
  if (unmatched == 0) return out;
  std::string names;
  for (const auto& m : missing) names += (names.empty() ? "" : ", ") + m;
  throw std::invalid_argument(file.string() + ": no caption for " + std::to_string(unmatched) + " of " +
                              std::to_string(images.size()) + " images (" + names + (unmatched > 3 ? ", …" : "") +
                              "): each image needs a row whose file_name is its path relative to the image folder");
}

}  // namespace privdiff::sdk
