# Check the include direction at configure time too, so a wrong include fails
# the build before it fails a test.
execute_process(COMMAND ${CMAKE_COMMAND} -DROOT=${PROJECT_SOURCE_DIR}
  -P ${PROJECT_SOURCE_DIR}/cmake/CheckLayering.cmake RESULT_VARIABLE layering_rc)
if(NOT layering_rc EQUAL 0)
  message(FATAL_ERROR "layering check failed (see above)")
endif()
