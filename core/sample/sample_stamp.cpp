#include "sample/sample_stamp.hpp"

#include "util/atomic_file.hpp"
#include "util/content_hash.hpp"

#include <nlohmann/json.hpp>

#include <fstream>
#include <stdexcept>

namespace privdiff::core {

namespace fs = std::filesystem;

namespace {

constexpr const char* stamp_prefix = "privdiff-run ";
constexpr unsigned char fhcrc = 0x02, fextra = 0x04, fname = 0x08, fcomment = 0x10;

// Where a gzip member's header fields are: [0, 10) fixed, then the optional ones in RFC 1952's
// order. nullopt when `bytes` does not start with a (complete) gzip header.
struct GzipHeader {
  unsigned char flags = 0;
  std::size_t extra_end = 10, name_end = 10, comment_begin = 10, comment_end = 10, end = 10;
};

std::optional<GzipHeader> parse_header(const std::string& bytes) {
  if (bytes.size() < 10 || static_cast<unsigned char>(bytes[0]) != 0x1f ||
      static_cast<unsigned char>(bytes[1]) != 0x8b || bytes[2] != 8) {
    return std::nullopt;
  }
  GzipHeader h;
  h.flags = static_cast<unsigned char>(bytes[3]);
  std::size_t at = 10;
  if (h.flags & fextra) {
    if (bytes.size() < at + 2) return std::nullopt;
    at += 2 + (static_cast<unsigned char>(bytes[at]) | (static_cast<unsigned char>(bytes[at + 1]) << 8));
  }
  h.extra_end = at;
  auto skip_text = [&bytes](std::size_t from) -> std::optional<std::size_t> {
    const auto zero = bytes.find('\0', from);
    if (zero == std::string::npos) return std::nullopt;
    return zero + 1;
  };
  if (h.flags & fname) {
    const auto next = skip_text(at);
    if (!next) return std::nullopt;
    at = *next;
  }
  h.name_end = h.comment_begin = at;
  if (h.flags & fcomment) {
    const auto next = skip_text(at);
    if (!next) return std::nullopt;
    at = *next;
  }
  h.comment_end = at;
  if (h.flags & fhcrc) at += 2;
  if (at > bytes.size()) return std::nullopt;
  h.end = at;
  return h;
}

}  // namespace

std::string run_recipe_hash(const fs::path& run_dir) {
  std::error_code ec;
  const fs::path recipe = run_dir / "recipe.toml";
  if (!fs::is_regular_file(recipe, ec)) return "";
  return content_hash(read_file(recipe));
}

SampleStamp stamp_of_run(const fs::path& run_dir) {
  std::error_code ec;
  fs::path where = fs::weakly_canonical(fs::absolute(run_dir), ec);
  if (ec) where = fs::absolute(run_dir);
  return SampleStamp{where, run_recipe_hash(run_dir)};
}

void stamp_gzip_file(const fs::path& file, const SampleStamp& stamp) {
  const std::string bytes = read_file(file);
  const auto header = parse_header(bytes);
  if (!header) throw std::runtime_error(file.string() + ": not a gzip file; cannot record its run in it");
  const std::string comment =
      stamp_prefix + nlohmann::json{{"run", stamp.run.string()}, {"recipe", stamp.recipe_hash}}.dump(
          -1, ' ', false, nlohmann::json::error_handler_t::replace);
  if (comment.find('\0') != std::string::npos) throw std::runtime_error(file.string() + ": run path holds a NUL");
  std::string out = bytes.substr(0, header->name_end);
  // The comment flag on; the header CRC (which would then be wrong) dropped.
  out[3] = static_cast<char>((header->flags | fcomment) & ~fhcrc);
  out += comment;
  out += '\0';
  out.append(bytes, header->end, std::string::npos);
  write_file_atomically(file, out);
}

std::optional<SampleStamp> read_sample_stamp(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  if (!in) return std::nullopt;
  std::string head(1 << 16, '\0');  // a header, with a run path, fits
  in.read(head.data(), static_cast<std::streamsize>(head.size()));
  head.resize(static_cast<std::size_t>(in.gcount()));
  const auto header = parse_header(head);
  if (!header || !(header->flags & fcomment)) return std::nullopt;
  const std::string comment = head.substr(header->comment_begin, header->comment_end - 1 - header->comment_begin);
  if (comment.rfind(stamp_prefix, 0) != 0) return std::nullopt;
  try {
    const auto json = nlohmann::json::parse(comment.substr(std::char_traits<char>::length(stamp_prefix)));
    return SampleStamp{fs::path(json.at("run").get<std::string>()), json.at("recipe").get<std::string>()};
  } catch (const nlohmann::json::exception&) {
    return std::nullopt;
  }
}

}  // namespace privdiff::core
