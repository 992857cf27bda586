# Installs the build tree into a scratch prefix, builds the example app
# against it with find_package(mmdoc), and runs it.
# Inputs: BUILD_DIR, SOURCE_DIR, CXX_FLAGS.
set(prefix ${BUILD_DIR}/install-test/prefix)
set(app ${BUILD_DIR}/install-test/app)
file(REMOVE_RECURSE ${BUILD_DIR}/install-test)
execute_process(COMMAND ${CMAKE_COMMAND} --install ${BUILD_DIR} --prefix ${prefix}
                RESULT_VARIABLE rc OUTPUT_QUIET)
if(rc)
  message(FATAL_ERROR "cmake --install failed: ${rc}")
endif()
execute_process(COMMAND ${CMAKE_COMMAND} -S ${SOURCE_DIR}/tests/install/example_app -B ${app}
                        -DCMAKE_PREFIX_PATH=${prefix} "-DCMAKE_CXX_FLAGS=${CXX_FLAGS}"
                        "-DCMAKE_EXE_LINKER_FLAGS=${CXX_FLAGS}"
                RESULT_VARIABLE rc)
if(rc)
  message(FATAL_ERROR "configuring the example app failed: ${rc}")
endif()
execute_process(COMMAND ${CMAKE_COMMAND} --build ${app} RESULT_VARIABLE rc)
if(rc)
  message(FATAL_ERROR "building the example app failed: ${rc}")
endif()
execute_process(COMMAND ${app}/example ${app}/example.mmdb RESULT_VARIABLE rc
                OUTPUT_VARIABLE out)
message(STATUS "example printed: ${out}")
if(rc)
  message(FATAL_ERROR "the example app failed: ${rc}")
endif()
if(NOT out MATCHES "ada")
  message(FATAL_ERROR "the example app did not print the document")
endif()
