# each_strategy.cmake: one test per strategy of the registry, so that a failing suite names
# the strategy it failed on. CTest reads this file when it starts (TEST_INCLUDE_FILES, set in
# tests/CMakeLists.txt, which writes each_strategy_suites.cmake: AB_ALLOCBENCH, AB_WORKDIR
# and AB_SUITES) and asks the binary for the registry, so a strategy added to
# strategies/registry.c gets its tests with no line here.
#
# AB_SUITES holds one item per suite, TEST|BINARY|ARGS|LABEL: the test TEST.STRATEGY runs
# BINARY ARGS --strategy=STRATEGY, with the label (cpu or gpu) of the suite.
execute_process(COMMAND "${AB_ALLOCBENCH}" list --strategies OUTPUT_VARIABLE listed RESULT_VARIABLE rc
                ERROR_VARIABLE why)
if(NOT rc EQUAL 0)
  # No list (the binary is not built): one test that fails and says so.
  add_test(each_strategy "${CMAKE_COMMAND}" -E false)
  set_tests_properties(each_strategy PROPERTIES LABELS cpu)
  message(WARNING "no per-strategy tests: `${AB_ALLOCBENCH} list --strategies` failed (${rc}): ${why}")
  return()
endif()
string(REGEX MATCHALL "[^\n]+" strategies "${listed}")
foreach(suite IN LISTS AB_SUITES)
  string(REGEX MATCH "^([^|]*)[|]([^|]*)[|]([^|]*)[|]([^|]*)$" fields "${suite}")
  set(test "${CMAKE_MATCH_1}")
  set(binary "${CMAKE_MATCH_2}")
  separate_arguments(args UNIX_COMMAND "${CMAKE_MATCH_3}")
  set(label "${CMAKE_MATCH_4}")
  foreach(strategy IN LISTS strategies)
    add_test("${test}.${strategy}" "${binary}" ${args} "--strategy=${strategy}")
    set_tests_properties("${test}.${strategy}" PROPERTIES TIMEOUT 300 SKIP_RETURN_CODE 77 LABELS ${label}
                         WORKING_DIRECTORY "${AB_WORKDIR}" FIXTURES_REQUIRED source_results)
    if(label STREQUAL "gpu")
      set_tests_properties("${test}.${strategy}" PROPERTIES RESOURCE_LOCK gpu)
    endif()
  endforeach()
endforeach()
