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
# The examples users read are compiled too, so they cannot rot: the one at
# the top of mmdoc/db.h (its "//   " lines, wrapped in a main) and the
# README's (the cpp block after its "compiled by tests/install" marker).
set(src ${BUILD_DIR}/install-test/src)
file(COPY ${SOURCE_DIR}/tests/install/example_app/ DESTINATION ${src})
file(STRINGS ${SOURCE_DIR}/include/mmdoc/db.h header_lines)
set(code "")
set(in_example FALSE)
foreach(line IN LISTS header_lines)
  if(line MATCHES "^//   (.*)$")
    string(APPEND code "${CMAKE_MATCH_1}\n")
    set(in_example TRUE)
  elseif(in_example)
    break()
  endif()
endforeach()
if(code STREQUAL "")
  message(FATAL_ERROR "no example found at the top of mmdoc/db.h")
endif()
file(WRITE ${src}/header_example.cc
     "#include <mmdoc/db.h>\nint main() {\n${code}  return s.ok() && found.ok() ? 0 : 1;\n}\n")
file(READ ${SOURCE_DIR}/README.md readme)
string(FIND "${readme}" "compiled by tests/install" at)
if(at EQUAL -1)
  message(FATAL_ERROR "README.md has no example marked 'compiled by tests/install'")
endif()
string(SUBSTRING "${readme}" ${at} -1 readme)
string(FIND "${readme}" "```cpp\n" begin)
string(SUBSTRING "${readme}" ${begin} -1 readme)
string(LENGTH "```cpp\n" skip)
string(SUBSTRING "${readme}" ${skip} -1 readme)
string(FIND "${readme}" "```" end)
string(SUBSTRING "${readme}" 0 ${end} readme_code)
file(WRITE ${src}/readme_example.cc "${readme_code}")
file(APPEND ${src}/CMakeLists.txt "add_executable(header_example header_example.cc)\n"
     "target_link_libraries(header_example PRIVATE mmdoc::mmdoc)\n"
     "add_executable(readme_example readme_example.cc)\n"
     "target_link_libraries(readme_example PRIVATE mmdoc::mmdoc)\n")
execute_process(COMMAND ${CMAKE_COMMAND} -S ${src} -B ${app}
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
foreach(example header_example readme_example)
  file(REMOVE ${app}/app.mmdb ${app}/app.mmdb-log)
  execute_process(COMMAND ${app}/${example} WORKING_DIRECTORY ${app} RESULT_VARIABLE rc
                  OUTPUT_VARIABLE out ERROR_VARIABLE err)
  message(STATUS "${example} printed: ${out}${err}")
  if(rc)
    message(FATAL_ERROR "${example} failed: ${rc}")
  endif()
endforeach()
