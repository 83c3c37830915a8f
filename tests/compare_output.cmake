# Runs PROGRAM and fails unless its standard output equals the file EXPECTED byte for byte.
execute_process(COMMAND ${PROGRAM} OUTPUT_VARIABLE actual RESULT_VARIABLE rc)
file(READ ${EXPECTED} expected)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "${PROGRAM} exited with ${rc}")
endif()
if(NOT actual STREQUAL expected)
  message(FATAL_ERROR "output of ${PROGRAM} differs\n--- expected\n${expected}--- actual\n${actual}")
endif()
