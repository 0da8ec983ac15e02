#pragma once
// The secret key under which privdiff hashes private records (record_set.hpp). It lives outside
// every run directory, in the user's configuration, and is made once from the OS CSPRNG:
//   $PRIVDIFF_RECORD_KEY (a file path), else $XDG_CONFIG_HOME/privdiff/record.key,
//   else $HOME/.config/privdiff/record.key (the passwd entry's home where HOME is unset).
// Runs made under the same key can show that their private data are disjoint; under another key
// (another machine or user) they cannot, and privdiff then assumes the data overlap.

#include "data/siphash.hpp"

#include <filesystem>
#include <string>

namespace privdiff::core {

struct RecordKey {
  SipKey key{};
  /// A public name of the key (a hash of it that does not reveal it): which runs share a key.
  std::string id;
  std::filesystem::path file;
};

/// Where the key lives (see above). Throws std::runtime_error when no location is set.
std::filesystem::path record_key_path();

/// Reads the key, creating it (mode 0600, 16 random bytes) on first use; concurrent first uses
/// agree on one key. Throws std::runtime_error naming the file when it cannot.
const RecordKey& record_key();

}  // namespace privdiff::core
