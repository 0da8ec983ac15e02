#include <privdiff/text/caption_sources.hpp>
#include <privdiff/text/tokenizer.hpp>

#include "text_file.hpp"
#include "unicode.hpp"

#include <stdexcept>

namespace privdiff::sdk {

namespace fs = std::filesystem;

std::string caption_problem(const std::string& caption) {
  if (caption.size() > Tokenizer::kMaxCaptionBytes) {
    return "a caption of " + std::to_string(caption.size()) + " bytes (at most " +
           std::to_string(Tokenizer::kMaxCaptionBytes) + ")";
  }
  std::u32string text;
  try {
    text = unicode::decode(caption);
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  for (std::size_t i = 0; i < caption.size(); ++i) {
    if (caption[i] == '\0') return "a NUL byte at byte " + std::to_string(i);
    if (caption[i] == '\n' || caption[i] == '\r') return "a line break inside the caption at byte " + std::to_string(i);
  }
  for (const char32_t c : text) {  // Unicode's other line breaks: NEL, LINE and PARAGRAPH SEPARATOR
    if (c == 0x85 || c == 0x2028 || c == 0x2029) {
      return std::string("a line break (") + (c == 0x85 ? "U+0085" : c == 0x2028 ? "U+2028" : "U+2029") + ") inside the caption";
    }
  }
  return "";
}

std::vector<std::string> read_caption_files(const fs::path& dir, const std::vector<std::string>& images, std::size_t line) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) throw std::invalid_argument(dir.string() + ": not a directory of caption files");
  if (line == 0) throw std::invalid_argument("caption line 0: lines are numbered from 1");
  std::vector<std::string> out;
  out.reserve(images.size());
  for (const std::string& image : images) {
    const fs::path file = (dir / image).replace_extension(".txt");
    if (!fs::exists(file, ec)) {
      throw std::invalid_argument(image + ": no caption file " + file.string() + " (one .txt per image, named as the image)");
    }
    const std::vector<std::string> lines = text_file::read_lines(file, "a caption file");
    if (lines.size() < line) {
      throw std::invalid_argument(file.string() + ": has " + std::to_string(lines.size()) + " line(s); caption line " +
                                  std::to_string(line) + " was asked for");
    }
    std::string caption = text_file::trimmed(lines[line - 1]);
    if (caption.empty()) throw text_file::error_at(file, line, "an empty caption");
    if (const std::string why = caption_problem(caption); !why.empty()) throw text_file::error_at(file, line, why);
    out.push_back(std::move(caption));
  }
  return out;
}

}  // namespace privdiff::sdk
