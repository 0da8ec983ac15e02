// Where privdiff keeps its cache: a path that is a file is refused by name (exit 2), not left to fail
// later with the file system's own text.
#include "util/cache_directory.hpp"

#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>

namespace privdiff::core {
namespace {

namespace fs = std::filesystem;

TEST(CacheDirectory, AFolderOrAPathNotYetMadeIsTaken) {
  const fs::path folder = fs::temp_directory_path() / "privdiff-cache-directory-test";
  fs::remove_all(folder);
  EXPECT_EQ(cache_directory(folder), folder);  // made later, by whoever writes into it
  fs::create_directories(folder);
  EXPECT_EQ(cache_directory(folder), folder);
  fs::remove_all(folder);
}

TEST(CacheDirectory, AFileIsRefusedNamingWhereItCameFrom) {
  const fs::path file = fs::temp_directory_path() / "privdiff-cache-directory-test.file";
  std::ofstream(file) << "not a folder";
  try {
    ::setenv("PRIVDIFF_CACHE_DIR", file.c_str(), 1);
    (void)cache_directory();
    ADD_FAILURE() << "a file taken as the cache folder";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("PRIVDIFF_CACHE_DIR " + file.string() + " is not a folder"), std::string::npos)
        << e.what();
  }
  ::unsetenv("PRIVDIFF_CACHE_DIR");
  EXPECT_THROW((void)cache_directory(file), UsageError);
  fs::remove(file);
}

}  // namespace
}  // namespace privdiff::core
