// Which code a run or a sweep runs (issue 67): each component's library and its SHA-256, recorded and
// compared on resume.
#include "loader/component_library.hpp"
#include "test_support.hpp"
#include "util/atomic_file.hpp"

#include <privdiff/io/content_hash.hpp>

#include <gtest/gtest.h>

using namespace privdiff;
using namespace privdiff::core;
using namespace privdiff::core::testing;

namespace {

const ComponentLibrary dpsgd{"mechanism", "dpsgd", "/opt/privdiff/lib/privdiff/plugins/libdpsgd.so", std::string(64, 'a')};
const ComponentLibrary rdp{"accountant", "rdp", "/opt/privdiff/lib/privdiff/plugins/librdp.so", std::string(64, 'b')};

}  // namespace

TEST(ComponentLibrary, EachUsedComponentHasItsLibraryAndTheFilesSha256) {
  const auto libraries = component_libraries(fixture_registry(), {{sdk::ComponentKind::mechanism, "fixture_mechanism"},
                                                                  {sdk::ComponentKind::model, "fixture_model"},
                                                                  {sdk::ComponentKind::mechanism, "fixture_mechanism"},
                                                                  {sdk::ComponentKind::mechanism, "not_loaded"}});
  ASSERT_EQ(libraries.size(), 2u);  // without repeats; one not loaded is left to validation
  const std::string library = std::filesystem::canonical(fixture_plugin("good")).string();
  EXPECT_EQ(libraries[0].kind, "mechanism");
  EXPECT_EQ(libraries[0].id, "fixture_mechanism");
  EXPECT_EQ(libraries[0].library, library);
  EXPECT_EQ(libraries[0].sha256, sdk::sha256_hex(read_file(library)));
  EXPECT_EQ(libraries[1].id, "fixture_model");
  const auto back = component_libraries_from_json(to_json(libraries));
  ASSERT_EQ(back.size(), 2u);
  EXPECT_EQ(back[1].library, library);
  EXPECT_EQ(back[1].sha256, libraries[1].sha256);
  EXPECT_THROW(component_libraries_from_json(nlohmann::json::parse(R"([{"kind": "model"}])")), std::runtime_error);
}

TEST(ComponentLibrary, AnotherLibraryForAnyComponentIsADifferenceNamingBoth) {
  EXPECT_EQ(library_difference({dpsgd, rdp}, {rdp, dpsgd}), "");
  ComponentLibrary moved = dpsgd;  // the same bytes installed elsewhere: the same code
  moved.library = "/usr/lib/privdiff/plugins/libdpsgd.so";
  EXPECT_EQ(library_difference({dpsgd, rdp}, {moved, rdp}), "");
  ComponentLibrary shadow{"mechanism", "dpsgd", "/home/me/plugins/libhalf.so", std::string(64, 'c')};
  EXPECT_EQ(library_difference({dpsgd, rdp}, {shadow, rdp}),
            "mechanism 'dpsgd' ran from /opt/privdiff/lib/privdiff/plugins/libdpsgd.so (sha256 " + std::string(64, 'a') +
                ") and would now run from /home/me/plugins/libhalf.so (sha256 " + std::string(64, 'c') + ")");
  ComponentLibrary rebuilt = dpsgd;  // the same path, other bytes
  rebuilt.sha256 = std::string(64, 'd');
  EXPECT_NE(library_difference({dpsgd}, {rebuilt}), "");
  EXPECT_EQ(library_difference({dpsgd, rdp}, {dpsgd}),
            "accountant 'rdp' ran from /opt/privdiff/lib/privdiff/plugins/librdp.so (sha256 " + std::string(64, 'b') +
                ") and is not loaded now");
  EXPECT_EQ(library_difference({dpsgd}, {dpsgd, rdp}).rfind("accountant 'rdp' is not in the record", 0), 0u);
  // Components built into the host (no file) are compared by the host's name.
  const ComponentLibrary built_in{"accountant", "a", "host", ""};
  EXPECT_EQ(library_difference({built_in}, {built_in}), "");
  EXPECT_EQ(library_difference({built_in}, {ComponentLibrary{"accountant", "a", "other", ""}}),
            "accountant 'a' ran from host (built into the host) and would now run from other (built into the host)");
}
