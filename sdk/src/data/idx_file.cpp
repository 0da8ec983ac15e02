#include <privdiff/data/idx_file.hpp>

#include <ATen/ATen.h>
#include <zlib.h>

#include <algorithm>
#include <cstdio>

#include <memory>
#include <stdexcept>

namespace privdiff::sdk {

namespace fs = std::filesystem;

namespace {

struct GzCloser {
  void operator()(gzFile_s* f) const { gzclose(f); }
};
using GzFile = std::unique_ptr<gzFile_s, GzCloser>;

// Reads exactly n bytes (gzread reads plain files too); false at a premature end.
bool read_exact(gzFile f, void* buffer, std::size_t n) {
  auto* out = static_cast<unsigned char*>(buffer);
  while (n > 0) {
    const int chunk = static_cast<int>(std::min<std::size_t>(n, 1 << 30));
    const int got = gzread(f, out, static_cast<unsigned>(chunk));
    if (got <= 0) return false;
    out += got;
    n -= static_cast<std::size_t>(got);
  }
  return true;
}

}  // namespace

IdxArray read_idx(const fs::path& file) {
  auto fail = [&](const std::string& why) { return std::runtime_error(file.string() + ": " + why); };
  std::error_code ec;
  if (!fs::is_regular_file(file, ec)) throw fail("no such file");
  GzFile f(gzopen(file.c_str(), "rb"));
  if (!f) throw fail("cannot be opened");
  unsigned char magic[4];
  if (!read_exact(f.get(), magic, 4)) throw fail("truncated (no IDX header)");
  if (magic[0] != 0 || magic[1] != 0) throw fail("not an IDX file (bad magic number)");
  if (magic[2] != 0x08) {
    char type[8];
    std::snprintf(type, sizeof type, "0x%02X", magic[2]);
    throw fail(std::string("unsupported IDX element type ") + type + " (need unsigned bytes, 0x08)");
  }
  const int rank = magic[3];
  if (rank < 1 || rank > 4) throw fail("unsupported IDX rank " + std::to_string(rank));
  IdxArray out;
  std::int64_t count = 1;
  for (int d = 0; d < rank; ++d) {
    unsigned char b[4];
    if (!read_exact(f.get(), b, 4)) throw fail("truncated IDX header");
    const std::int64_t size = (std::int64_t{b[0]} << 24) | (b[1] << 16) | (b[2] << 8) | b[3];
    if (size <= 0 || size > (1 << 28)) throw fail("implausible IDX dimension " + std::to_string(size));
    out.shape.push_back(size);
    count *= size;
    if (count > (std::int64_t{1} << 33)) throw fail("IDX array too large");
  }
  // Grown as the data arrives: a header that promises more than the file holds is refused after
  // reading what is there, never by first allocating what it promises (found by fuzz/idx_fuzzer).
  const auto want = static_cast<std::size_t>(count);
  constexpr std::size_t chunk = std::size_t{1} << 24;
  while (out.data.size() < want) {
    const std::size_t have = out.data.size(), n = std::min(chunk, want - have);
    out.data.resize(have + n);
    if (!read_exact(f.get(), out.data.data() + have, n)) {
      throw fail("truncated: the header promises " + std::to_string(count) + " values");
    }
  }
  unsigned char extra;
  if (gzread(f.get(), &extra, 1) > 0) throw fail("corrupt: data after the last value");
  return out;
}

void write_idx(const fs::path& file, const IdxArray& array) {
  const bool gz = file.extension() == ".gz";
  GzFile f(gzopen(file.c_str(), gz ? "wb9" : "wbT"));
  if (!f) throw std::runtime_error(file.string() + ": cannot be created");
  std::vector<unsigned char> header{0, 0, 0x08, static_cast<unsigned char>(array.shape.size())};
  for (std::int64_t s : array.shape) {
    for (int shift : {24, 16, 8, 0}) header.push_back(static_cast<unsigned char>((s >> shift) & 0xff));
  }
  if (gzwrite(f.get(), header.data(), static_cast<unsigned>(header.size())) != static_cast<int>(header.size()) ||
      (!array.data.empty() &&
       gzwrite(f.get(), array.data.data(), static_cast<unsigned>(array.data.size())) != static_cast<int>(array.data.size()))) {
    throw std::runtime_error(file.string() + ": write failed");
  }
}

namespace {
// "<dir>/<stem>.gz" or "<dir>/<stem>" for the first stem that exists (both: they must hold the same array).
fs::path find_idx_file(const fs::path& dir, const std::vector<std::string>& stems) {
  std::error_code ec;
  for (const std::string& stem : stems) {
    const fs::path gz = dir / (stem + ".gz"), raw = dir / stem;
    const bool has_gz = fs::is_regular_file(gz, ec), has_raw = fs::is_regular_file(raw, ec);
    if (has_gz && has_raw) {  // gunzip -k leaves both: fine while they hold the same array, refused otherwise
      const IdxArray a = read_idx(gz), b = read_idx(raw);
      if (a.shape != b.shape || a.data != b.data) {
        throw std::runtime_error(raw.string() + " and " + gz.string() + " both exist and hold different data: "
                                 "remove the one that is not meant (privdiff would otherwise read one of them)");
      }
    }
    if (has_gz) return gz;
    if (has_raw) return raw;
  }
  std::string also;
  for (std::size_t k = 1; k < stems.size(); ++k) also += " (or " + stems[k] + "[.gz])";
  throw std::runtime_error((dir / stems[0]).string() + "[.gz]" + also + " not found");
}
}  // namespace

LabelledBytes read_idx_split(const fs::path& dir, const std::string& split) { return read_idx_split(dir, split, ""); }

LabelledBytes read_idx_split(const fs::path& dir, const std::string& split, const std::string& prefix) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) throw std::runtime_error(dir.string() + " is not a directory");
  const std::vector<std::string> names =
      split == "train" ? std::vector<std::string>{prefix + "train"} : std::vector<std::string>{prefix + "t10k", prefix + "test"};
  auto stems = [&](const std::string& kind) {
    std::vector<std::string> out;
    for (const auto& name : names) out.push_back(name + "-" + kind + "-ubyte");
    return out;
  };
  const IdxArray images = read_idx(find_idx_file(dir, stems("images-idx3")));
  const IdxArray labels = read_idx(find_idx_file(dir, stems("labels-idx1")));
  // [N, H, W] (the MNIST family), or [N, C, H, W] (what privdiff writes for colour images).
  if (images.shape.size() != 3 && images.shape.size() != 4) {
    throw std::runtime_error(dir.string() + ": the " + split + " images file is not [N, H, W] or [N, C, H, W] (rank " +
                             std::to_string(images.shape.size()) + ")");
  }
  if (labels.shape.size() != 1 || labels.shape[0] != images.shape[0]) {
    throw std::runtime_error(dir.string() + ": " + std::to_string(images.shape[0]) + " " + split + " images but " +
                             std::to_string(labels.shape.empty() ? 0 : labels.shape[0]) + " labels");
  }
  const std::int64_t n = images.shape[0];
  LabelledBytes out;
  std::vector<std::int64_t> shape = images.shape;
  if (shape.size() == 3) shape.insert(shape.begin() + 1, 1);
  out.images = at::empty(shape, at::kByte);
  std::copy(images.data.begin(), images.data.end(), out.images.data_ptr<std::uint8_t>());
  at::Tensor label_bytes = at::empty({n}, at::kByte);
  std::copy(labels.data.begin(), labels.data.end(), label_bytes.data_ptr<std::uint8_t>());
  out.labels = label_bytes.to(at::kLong);
  out.num_classes = std::max<std::int64_t>(10, n > 0 ? out.labels.max().item<std::int64_t>() + 1 : 0);
  return out;
}

fs::path system_idx_directory(const std::string& name) {
  if (name == "fashion-mnist") return "/usr/share/datasets/fashion-mnist";
  if (name == "mnist") return "/usr/share/datasets/mnist";
  return {};
}

}  // namespace privdiff::sdk
