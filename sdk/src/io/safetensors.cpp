#include <privdiff/io/atomic_file.hpp>
#include <privdiff/io/safetensors.hpp>

#include <privdiff/io/json_error.hpp>

#include <ATen/ATen.h>
#include <nlohmann/json.hpp>

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <limits>
#include <set>
#include <stdexcept>

#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "safetensors data is little-endian: this reader maps it as it lies"
#endif

namespace privdiff::sdk {

namespace {

// The header's length is capped as by Python's reader: a larger one is a corrupt or hostile file.
constexpr std::uint64_t max_header_bytes = 100'000'000;

struct DtypeInfo {
  const char* name;
  std::uint64_t bytes;
  bool in_libtorch;
  at::ScalarType type;
  int rank;  // the dtype's place in the format's own list; the writer puts higher ranks first
};

// The format's dtypes (F8 and the wide unsigned types have no LibTorch type in every version we
// build on). Ranks follow the Dtype enum of the reference implementation (safetensors 0.8), whose
// writer orders tensors by it, descending, then by name: privdiff writes the same layout.
const DtypeInfo dtypes[] = {
    {"BOOL", 1, true, at::kBool, 0},      {"U8", 1, true, at::kByte, 4},        {"I8", 1, true, at::kChar, 5},
    {"F8_E5M2", 1, false, at::kByte, 6},  {"F8_E4M3", 1, false, at::kByte, 7},  {"I16", 2, true, at::kShort, 9},
    {"U16", 2, false, at::kByte, 10},     {"F16", 2, true, at::kHalf, 11},      {"BF16", 2, true, at::kBFloat16, 12},
    {"I32", 4, true, at::kInt, 13},       {"U32", 4, false, at::kByte, 14},     {"F32", 4, true, at::kFloat, 15},
    {"F64", 8, true, at::kDouble, 17},    {"I64", 8, true, at::kLong, 18},      {"U64", 8, false, at::kByte, 19},
};

const DtypeInfo* dtype_named(const std::string& name) {
  for (const auto& d : dtypes) {
    if (name == d.name) return &d;
  }
  return nullptr;
}

std::string known_dtypes() {
  std::string out;
  for (const auto& d : dtypes) out += (out.empty() ? "" : ", ") + std::string(d.name);
  return out;
}

[[noreturn]] void refuse(const std::string& what, const std::string& why) {
  throw std::runtime_error(what + ": safetensors: " + why);
}

// The first name given twice in one object, found by a SAX pass over the text (nlohmann's parser
// with a callback would rescan the enclosing object at every object's end: quadratic in the number
// of tensors).
struct RepeatedKey : nlohmann::json_sax<nlohmann::json> {
  std::vector<std::set<std::string>> keys;  // one set per open object
  std::string repeated;
  bool null() override { return true; }
  bool boolean(bool) override { return true; }
  bool number_integer(number_integer_t) override { return true; }
  bool number_unsigned(number_unsigned_t) override { return true; }
  bool number_float(number_float_t, const string_t&) override { return true; }
  bool string(string_t&) override { return true; }
  bool binary(binary_t&) override { return true; }
  bool start_object(std::size_t) override { return keys.emplace_back(), true; }
  bool end_object() override { return keys.pop_back(), true; }
  bool start_array(std::size_t) override { return true; }
  bool end_array() override { return true; }
  bool key(string_t& name) override {
    if (!keys.back().insert(name).second && repeated.empty()) repeated = name;
    return true;
  }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception&) override { return false; }
};

// The JSON header, refusing a name given twice in any object (nlohmann would keep the last).
nlohmann::json parse_json(std::string_view text, const std::string& what) {
  nlohmann::json header;
  try {
    header = nlohmann::json::parse(text.begin(), text.end());
  } catch (const nlohmann::json::exception& e) {
    refuse(what, std::string("the header is not valid JSON (") + json_error_text(e) + ")");
  }
  RepeatedKey sax;
  nlohmann::json::sax_parse(text.begin(), text.end(), &sax);
  if (!sax.repeated.empty()) refuse(what, "the header names '" + sax.repeated + "' twice");
  if (!header.is_object()) refuse(what, "the header is JSON but not an object");
  return header;
}

std::uint64_t offset(const nlohmann::json& value, const std::string& what, const std::string& name) {
  if (!value.is_number_unsigned()) refuse(what, "tensor '" + name + "': data_offsets must be non-negative integers");
  return value.get<std::uint64_t>();
}

SafetensorsEntry entry_of(const std::string& name, const nlohmann::json& spec, const std::string& what) {
  const std::string where = "tensor '" + name + "'";
  if (!spec.is_object()) refuse(what, where + ": expected an object with dtype, shape and data_offsets");
  for (const auto& [key, value] : spec.items()) {
    if (key != "dtype" && key != "shape" && key != "data_offsets") refuse(what, where + ": unknown field '" + key + "'");
  }
  if (!spec.contains("dtype") || !spec["dtype"].is_string()) refuse(what, where + ": dtype must be a string");
  SafetensorsEntry e;
  e.name = name;
  e.dtype = spec["dtype"].get<std::string>();
  const DtypeInfo* dtype = dtype_named(e.dtype);
  if (!dtype) refuse(what, where + ": unknown dtype '" + e.dtype + "' (expected one of " + known_dtypes() + ")");
  if (!spec.contains("shape") || !spec["shape"].is_array()) refuse(what, where + ": shape must be an array");
  std::uint64_t bytes = dtype->bytes;
  bool overflow = false;
  for (const auto& d : spec["shape"]) {
    if (!d.is_number_unsigned() || d.get<std::uint64_t>() > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())) {
      refuse(what, where + ": shape entries must be non-negative integers");
    }
    const auto size = d.get<std::uint64_t>();
    e.shape.push_back(static_cast<std::int64_t>(size));
    if (size != 0 && bytes > std::numeric_limits<std::uint64_t>::max() / size) overflow = true;
    bytes *= size;
  }
  const auto& offsets = spec.contains("data_offsets") ? spec["data_offsets"] : nlohmann::json();
  if (!offsets.is_array() || offsets.size() != 2) refuse(what, where + ": data_offsets must be [begin, end]");
  e.begin = offset(offsets[0], what, name);
  e.end = offset(offsets[1], what, name);
  if (e.end < e.begin) refuse(what, where + ": data_offsets [" + std::to_string(e.begin) + ", " + std::to_string(e.end) + "] end before they begin");
  if (overflow || bytes != e.end - e.begin) {
    refuse(what, where + ": " + e.dtype + " of this shape needs " + (overflow ? "more than 2^64" : std::to_string(bytes)) +
                     " bytes, its data_offsets hold " + std::to_string(e.end - e.begin));
  }
  return e;
}

// The tensors must tile the data section: sorted by offset, each begins where the last ended.
void check_tiling(std::vector<SafetensorsEntry>& entries, std::uint64_t data_bytes, const std::string& what) {
  std::sort(entries.begin(), entries.end(), [](const auto& a, const auto& b) {
    return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
  });
  // Messages are appended, not chained with operator+: GCC 12's -Wrestrict misfires on such chains
  // here in C++20 (the LibTorch 2.x build).
  std::uint64_t covered = 0;
  const SafetensorsEntry* previous = nullptr;
  for (const auto& e : entries) {
    std::string range = "[";
    range.append(std::to_string(e.begin)).append(", ").append(std::to_string(e.end)).append(")");
    if (e.end > data_bytes) {
      refuse(what, "tensor '" + e.name + "' " + range + " runs past the data section's " + std::to_string(data_bytes) + " bytes");
    }
    if (e.begin < covered) {
      std::string message = "tensors '";
      message.append(previous->name).append("' and '").append(e.name).append("' ").append(range).append(" overlap");
      refuse(what, message);
    }
    if (e.begin > covered) {
      refuse(what, "bytes [" + std::to_string(covered) + ", " + std::to_string(e.begin) + ") of the data belong to no tensor");
    }
    covered = e.end;
    previous = &e;
  }
  if (covered != data_bytes) {
    refuse(what, "the data section has " + std::to_string(data_bytes - covered) + " bytes after the last tensor");
  }
}

}  // namespace

std::int64_t SafetensorsEntry::numel() const {
  std::int64_t n = 1;
  for (auto d : shape) n *= d;
  return n;
}

// Formats people hand in for safetensors, named instead of read as a nonsense header length.
static void refuse_other_formats(std::string_view bytes, const std::string& what) {
  const auto starts = [&](std::string_view magic) { return bytes.substr(0, magic.size()) == magic; };
  const std::string convert = ": load it in Python and write safetensors (safetensors.torch.save_file(state_dict, "
                              "\"model.safetensors\")), or use privdiff weights import for a diffusers folder";
  if (starts("PK\x03\x04")) refuse(what, "this is a zip archive, as torch.save writes a PyTorch checkpoint (.pt, .pth, .ckpt), not safetensors" + convert);
  if (starts("\x80\x02") || starts("\x80\x03") || starts("\x80\x04") || starts("\x80\x05")) {
    refuse(what, "this is a Python pickle (an old-style PyTorch checkpoint), not safetensors" + convert);
  }
  if (starts("\x93NUMPY")) refuse(what, "this is a NumPy .npy array, not safetensors");
  if (starts("\x89HDF")) refuse(what, "this is an HDF5 file (Keras weights?), not safetensors");
}

SafetensorsHeader parse_safetensors(std::string_view bytes, const std::string& what) {
  if (bytes.size() < 8) refuse(what, "the file is " + std::to_string(bytes.size()) + " bytes, shorter than the 8-byte header length");
  std::uint64_t header_bytes = 0;
  std::memcpy(&header_bytes, bytes.data(), 8);
  // A real header's length fits the file and its JSON starts with '{': only a file that is not
  // safetensors is looked at for another format's magic (a valid length may begin with those bytes).
  if (header_bytes > max_header_bytes || header_bytes > bytes.size() - 8 || header_bytes == 0 || bytes[8] != '{') {
    refuse_other_formats(bytes, what);
  }
  if (header_bytes > max_header_bytes) {
    refuse(what, "a header of " + std::to_string(header_bytes) + " bytes is over the limit of " + std::to_string(max_header_bytes));
  }
  if (header_bytes > bytes.size() - 8) {
    refuse(what, "the header length " + std::to_string(header_bytes) + " runs past the end of the file (" +
                     std::to_string(bytes.size()) + " bytes): truncated, or not safetensors");
  }
  const nlohmann::json header = parse_json(bytes.substr(8, header_bytes), what);
  SafetensorsHeader out;
  out.data_offset = 8 + header_bytes;
  for (const auto& [name, spec] : header.items()) {
    if (name == "__metadata__") {
      if (!spec.is_object()) refuse(what, "__metadata__ must be an object of strings");
      for (const auto& [key, value] : spec.items()) {
        if (!value.is_string()) refuse(what, "__metadata__ '" + key + "' must be a string");
        out.metadata[key] = value.get<std::string>();
      }
      continue;
    }
    out.entries.push_back(entry_of(name, spec, what));
  }
  check_tiling(out.entries, bytes.size() - out.data_offset, what);
  return out;
}

// ---------------------------------------------------------------- the mapped file
struct SafetensorsFile::Mapping {
  void* address = MAP_FAILED;
  std::size_t size = 0;
  ~Mapping() {
    if (address != MAP_FAILED) ::munmap(address, size);
  }
  const char* bytes() const { return static_cast<const char*>(address); }
};

SafetensorsFile::SafetensorsFile(const std::filesystem::path& path) : path_(path), mapping_(std::make_shared<Mapping>()) {
  const std::string what = path.string();
  // O_NONBLOCK: a FIFO opens at once (and is refused below) instead of waiting for a writer.
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) throw std::runtime_error(what + ": cannot open (" + std::strerror(errno) + ")");
  struct stat status {};
  if (::fstat(fd, &status) != 0 || !S_ISREG(status.st_mode)) {
    ::close(fd);
    throw std::runtime_error(what + ": not a regular file (a pipe or a device)");
  }
  mapping_->size = static_cast<std::size_t>(status.st_size);
  if (mapping_->size > 0) {
    // Private and writable: a tensor handed out may be written to; the file never is.
    mapping_->address = ::mmap(nullptr, mapping_->size, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 0);
  }
  ::close(fd);
  if (mapping_->size > 0 && mapping_->address == MAP_FAILED) {
    throw std::runtime_error(what + ": cannot map (" + std::strerror(errno) + ")");
  }
  header_ = parse_safetensors(std::string_view(mapping_->size ? mapping_->bytes() : "", mapping_->size), what);
  for (std::size_t i = 0; i < header_.entries.size(); ++i) index_.emplace(header_.entries[i].name, i);
}

const SafetensorsEntry* SafetensorsFile::find(const std::string& name) const {
  const auto it = index_.find(name);
  return it == index_.end() ? nullptr : &header_.entries[it->second];
}

at::Tensor SafetensorsFile::tensor(const std::string& name) const {
  const SafetensorsEntry* e = find(name);
  if (!e) throw std::out_of_range(path_.string() + ": safetensors: no tensor named '" + name + "'");
  const DtypeInfo* dtype = dtype_named(e->dtype);
  if (!dtype->in_libtorch) {
    throw std::runtime_error(path_.string() + ": safetensors: tensor '" + name + "' is " + e->dtype +
                             ", which LibTorch has no type for here");
  }
  const auto options = at::TensorOptions(dtype->type);
  char* data = const_cast<char*>(mapping_->bytes()) + header_.data_offset + e->begin;
  if (e->end == e->begin || reinterpret_cast<std::uintptr_t>(data) % dtype->bytes != 0) {
    // Unaligned (the format does not promise alignment) or empty: a copy of its own.
    at::Tensor copy = at::empty(e->shape, options);
    if (e->end > e->begin) std::memcpy(copy.data_ptr(), data, e->end - e->begin);
    return copy;
  }
  auto keep = mapping_;
  return at::from_blob(data, e->shape, [keep](void*) {}, options);
}

std::map<std::string, at::Tensor> SafetensorsFile::tensors() const {
  std::map<std::string, at::Tensor> out;
  for (const auto& e : header_.entries) out.emplace(e.name, tensor(e.name));
  return out;
}

// ---------------------------------------------------------------- writing
std::string safetensors_bytes(const std::vector<std::pair<std::string, at::Tensor>>& tensors,
                              const std::map<std::string, std::string>& metadata) {
  struct Item {
    std::string name;
    const DtypeInfo* dtype;
    at::Tensor data;
  };
  std::vector<Item> items;
  std::set<std::string> names;
  for (const auto& [name, t] : tensors) {
    if (name.empty() || name == "__metadata__") throw std::invalid_argument("safetensors: a tensor may not be named '" + name + "'");
    if (!names.insert(name).second) throw std::invalid_argument("safetensors: the name '" + name + "' is given twice");
    const DtypeInfo* dtype = nullptr;
    for (const auto& d : dtypes) {
      if (d.in_libtorch && d.type == t.scalar_type()) dtype = &d;
    }
    if (!dtype) throw std::invalid_argument("safetensors: tensor '" + name + "' has a dtype safetensors cannot hold");
    items.push_back({name, dtype, t.detach().to(at::kCPU).contiguous()});
  }
  std::sort(items.begin(), items.end(), [](const Item& a, const Item& b) {
    return a.dtype->rank != b.dtype->rank ? a.dtype->rank > b.dtype->rank : a.name < b.name;
  });
  // The header's object written member by member (an ordered_json would search its keys at each
  // insertion: quadratic in the number of tensors).
  std::string text = "{";
  if (!metadata.empty()) text += "\"__metadata__\":" + nlohmann::json(metadata).dump();
  std::uint64_t at = 0;
  for (const auto& item : items) {
    const auto bytes = static_cast<std::uint64_t>(item.data.nbytes());
    const nlohmann::ordered_json spec = {
        {"dtype", item.dtype->name}, {"shape", item.data.sizes().vec()}, {"data_offsets", {at, at + bytes}}};
    text += (text.size() > 1 ? "," : "") + nlohmann::json(item.name).dump() + ":" + spec.dump();
    at += bytes;
  }
  text += "}";
  text.append((8 - text.size() % 8) % 8, ' ');
  std::string out(8, '\0');
  const std::uint64_t length = text.size();
  std::memcpy(out.data(), &length, 8);
  out += text;
  out.reserve(out.size() + at);
  for (const auto& item : items) out.append(static_cast<const char*>(item.data.data_ptr()), item.data.nbytes());
  return out;
}

void write_safetensors(const std::filesystem::path& path, const std::vector<std::pair<std::string, at::Tensor>>& tensors,
                       const std::map<std::string, std::string>& metadata) {
  write_file_atomically(path, safetensors_bytes(tensors, metadata));
}

}  // namespace privdiff::sdk
