# privdiff_add_plugin(NAME SOURCES... [OUTPUT_DIRECTORY DIR] [NO_INSTALL])
#
# Builds a privdiff plugin: a MODULE library named lib<NAME>.so linked to privdiff::sdk,
# with hidden visibility (only the descriptor is exported) and no unresolved symbols left
# for load time (-Wl,--no-undefined), so a broken plugin fails at link time, not in the host.
# Used in-tree and, after find_package(privdiff), by out-of-tree plugins.
function(privdiff_add_plugin name)
  cmake_parse_arguments(ARG "NO_INSTALL" "OUTPUT_DIRECTORY" "" ${ARGN})
  if(NOT ARG_UNPARSED_ARGUMENTS)
    message(FATAL_ERROR "privdiff_add_plugin(${name}): no sources given")
  endif()
  add_library(${name} MODULE ${ARG_UNPARSED_ARGUMENTS})
  if(TARGET privdiff::sdk)
    target_link_libraries(${name} PRIVATE privdiff::sdk)
  else()
    target_link_libraries(${name} PRIVATE privdiff_sdk)
  endif()
  # Installed plugins live in <prefix>/<libdir>/privdiff/plugins, two levels below the SDK.
  set_target_properties(${name} PROPERTIES
    CXX_VISIBILITY_PRESET hidden
    VISIBILITY_INLINES_HIDDEN ON
    PREFIX "lib"
    INSTALL_RPATH "$ORIGIN/../.."
    INSTALL_RPATH_USE_LINK_PATH ON)
  if(CMAKE_CXX_COMPILER_ID MATCHES "GNU|Clang")
    target_link_options(${name} PRIVATE "-Wl,--no-undefined")
  endif()
  if(ARG_OUTPUT_DIRECTORY)
    set_target_properties(${name} PROPERTIES LIBRARY_OUTPUT_DIRECTORY "${ARG_OUTPUT_DIRECTORY}")
  elseif(DEFINED PRIVDIFF_PLUGIN_OUTPUT_DIR)
    set_target_properties(${name} PROPERTIES LIBRARY_OUTPUT_DIRECTORY "${PRIVDIFF_PLUGIN_OUTPUT_DIR}")
  endif()
  if(NOT ARG_NO_INSTALL AND DEFINED PRIVDIFF_PLUGIN_INSTALL_DIR)
    install(TARGETS ${name} LIBRARY DESTINATION "${PRIVDIFF_PLUGIN_INSTALL_DIR}")
  endif()
endfunction()
