#include "data/record_key.hpp"

#include <privdiff/engine/random_stream.hpp>

#include <fcntl.h>
#include <pwd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iomanip>
#include <map>
#include <mutex>
#include <sstream>
#include <stdexcept>

namespace privdiff::core {

namespace fs = std::filesystem;

fs::path record_key_path() {
  if (const char* file = std::getenv("PRIVDIFF_RECORD_KEY"); file && *file) return file;
  if (const char* dir = std::getenv("XDG_CONFIG_HOME"); dir && *dir) return fs::path(dir) / "privdiff" / "record.key";
  if (const char* home = std::getenv("HOME"); home && *home) return fs::path(home) / ".config" / "privdiff" / "record.key";
  if (const passwd* user = ::getpwuid(::getuid()); user && user->pw_dir && *user->pw_dir) {  // HOME unset (cron, CI)
    return fs::path(user->pw_dir) / ".config" / "privdiff" / "record.key";
  }
  throw std::runtime_error("no place for privdiff's record key: set PRIVDIFF_RECORD_KEY (a file path) or HOME");
}

namespace {

std::string hex(std::uint64_t v) {
  std::ostringstream os;
  os << std::hex << std::setw(16) << std::setfill('0') << v;
  return os.str();
}

// The key's public name: a hash of a fixed label under the key (reveals nothing of the key).
std::string key_id(const SipKey& key) {
  static constexpr char label[] = "privdiff record key id";
  return hex(siphash24(key, label, sizeof label - 1));
}

std::string read_key_text(const fs::path& file) {
  std::ifstream in(file);
  std::string text;
  in >> text;
  if (!in && !in.eof()) throw std::runtime_error("cannot read privdiff's record key " + file.string());
  return text;
}

// Creates the key file unless it exists: the new key is written to a temporary file, then linked
// to its name, which fails (EEXIST) when another process made it first; that one's key is kept.
void create_key_file(const fs::path& file) {
  std::error_code ec;
  fs::create_directories(file.parent_path().empty() ? fs::path(".") : file.parent_path(), ec);
  SipKey key{};
  sdk::engine::os_random_bytes(key.data(), key.size());
  std::ostringstream text;
  for (std::uint8_t b : key) text << std::hex << std::setw(2) << std::setfill('0') << static_cast<int>(b);
  text << "\n";
  const fs::path tmp = file.string() + ".tmp." + std::to_string(::getpid());
  // Created owner-only (0600) from the start: the key is a membership oracle for every run made
  // under it, and a chmod after writing would leave it readable for a moment.
  fs::remove(tmp, ec);
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, S_IRUSR | S_IWUSR);
  if (fd < 0) throw std::runtime_error("cannot write privdiff's record key " + tmp.string() + ": " + std::strerror(errno));
  const std::string bytes = text.str();
  const bool written = ::write(fd, bytes.data(), bytes.size()) == static_cast<ssize_t>(bytes.size());
  if (::close(fd) != 0 || !written) {
    fs::remove(tmp, ec);
    throw std::runtime_error("cannot write privdiff's record key " + tmp.string());
  }
  const int linked = ::link(tmp.c_str(), file.c_str());
  const int link_errno = errno;
  fs::remove(tmp, ec);
  if (linked != 0 && link_errno != EEXIST) {
    throw std::runtime_error("cannot create privdiff's record key " + file.string() + ": " + std::strerror(link_errno));
  }
}

// A key for this process only, where none can be kept (a read-only home): the safe side, since
// records hashed under it can never be shown disjoint from anything later.
RecordKey ephemeral_key(const std::string& why) {
  RecordKey k;
  sdk::engine::os_random_bytes(k.key.data(), k.key.size());
  k.id = "ephemeral-" + key_id(k.key);
  k.file = "(a key for this process only: " + why + ")";
  return k;
}

RecordKey load_key() {
  RecordKey k;
  k.file = record_key_path();
  std::error_code ec;
  if (!fs::exists(k.file, ec)) {
    try {
      create_key_file(k.file);
    } catch (const std::runtime_error& e) {
      return ephemeral_key(e.what());
    }
  }
  const std::string text = read_key_text(k.file);
  if (text.size() != 32 || text.find_first_not_of("0123456789abcdefABCDEF") != std::string::npos) {
    throw std::runtime_error("privdiff's record key " + k.file.string() + " is damaged (expected 32 hex digits); "
                             "remove it to make a new one (runs made under the old key then count as unknown)");
  }
  for (std::size_t i = 0; i < 16; ++i) k.key[i] = static_cast<std::uint8_t>(std::stoul(text.substr(2 * i, 2), nullptr, 16));
  k.id = key_id(k.key);
  return k;
}

}  // namespace

const RecordKey& record_key() {
  // Read once per location (a run asks many times); a changed PRIVDIFF_RECORD_KEY reads another.
  static std::mutex mutex;
  static std::map<fs::path, RecordKey> keys;
  const fs::path file = record_key_path();
  std::lock_guard<std::mutex> lock(mutex);
  auto it = keys.find(file);
  if (it == keys.end()) it = keys.emplace(file, load_key()).first;
  return it->second;
}

}  // namespace privdiff::core
