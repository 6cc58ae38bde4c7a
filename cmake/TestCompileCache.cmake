# The tests' compile cache: every test of a directory compiles models in
# process through the cache at ${CMAKE_BINARY_DIR}/compile-cache (not the
# user's), so that a clean build's tests start from an empty cache.
set(ENERGY_TEST_CACHE_DIR ${CMAKE_BINARY_DIR}/compile-cache)

# Sets ENERGY_CACHE_DIR for every test added so far in the calling directory.
function(energy_tests_use_test_cache)
  get_property(tests DIRECTORY PROPERTY TESTS)
  if(tests)
    set_property(TEST ${tests} APPEND PROPERTY ENVIRONMENT_MODIFICATION
                 "ENERGY_CACHE_DIR=set:${ENERGY_TEST_CACHE_DIR}")
  endif()
endfunction()
