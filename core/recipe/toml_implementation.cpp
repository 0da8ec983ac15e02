// toml++'s implementation, compiled once for the whole host (TOML_HEADER_ONLY=0 everywhere else):
// only its headers need to be installed, and the recipe code does not recompile it in every file.
#define TOML_IMPLEMENTATION
#include <toml++/toml.h>
