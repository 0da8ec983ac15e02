# Included by ctest (the test directory's TEST_INCLUDE_FILES, written by privdiff_test_binary):
# one ctest test per GoogleTest *suite* of a test binary, named `Suite.*` and run with
# --gtest_filter=Suite.*. One process per suite instead of per test: each process pays LibTorch's
# start-up (0.5 s here: Debian's libtorch_cpu loads OpenCV, FFmpeg and 80 other libraries), which
# over 435 tests was a fifth of the suite's time.
# Input variables: test_binary, test_labels, test_working_directory.
if(NOT EXISTS "${test_binary}")
  add_test("${test_binary}-not-built" "${test_binary}")
  return()
endif()
execute_process(COMMAND "${test_binary}" --gtest_list_tests
  OUTPUT_VARIABLE listing RESULT_VARIABLE listed TIMEOUT 60)
if(NOT listed EQUAL 0)
  message(WARNING "${test_binary} --gtest_list_tests failed (${listed}): ${listing}")
  add_test("${test_binary}-listing" "${test_binary}" --gtest_list_tests)
  return()
endif()
set(skip_when_all_skipped [=[out=$("$0" "--gtest_filter=$1.*" 2>&1); rc=$?; printf '%s\n' "$out"; if [ "$rc" = 0 ] && printf '%s\n' "$out" | grep -q '^\[  PASSED  \] 0 tests'; then exit 77; fi; exit "$rc"]=])
string(REPLACE "\n" ";" lines "${listing}")
foreach(line IN LISTS lines)
  # A suite line: "Suite." or "Prefix/Suite." (a comment may follow); test lines are indented.
  if(line MATCHES "^([A-Za-z0-9_/]+)\\.")
    set(suite "${CMAKE_MATCH_1}")
    # Skipped (exit 77) only when the suite passed with every test skipped (a GPU suite without a
    # GPU); one skipped test among passing ones leaves the suite passed, its output saying which. A
    # failure is a failure: matching gtest's "[  PASSED  ] 0 tests" with SKIP_REGULAR_EXPRESSION, as
    # this file once did, reported a one-test suite that failed as skipped.
    add_test("${suite}.*" sh -c "${skip_when_all_skipped}" "${test_binary}" "${suite}")
    set_tests_properties("${suite}.*" PROPERTIES
      WORKING_DIRECTORY "${test_working_directory}"
      SKIP_RETURN_CODE 77
      LABELS "${test_labels}")
  endif()
endforeach()
