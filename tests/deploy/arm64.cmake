# arm64 tests (label arm64), included from tests/deploy/CMakeLists.txt.
# In a cross build (deploy/cmake/aarch64-linux-gnu.cmake): the unit tests run
# under qemu-user through CMAKE_CROSSCOMPILING_EMULATOR, and arm64_mesh runs a
# 3-agent mesh of arm64 agents. In a native build: arm64_cross runs the whole
# cross build (scripts/cross-build --tests, ~25 min on 2 cores) only when
# MESH_ARM64=1, and otherwise is skipped with the reason, so CI stays fast.
if(CMAKE_CROSSCOMPILING)
  add_test(NAME arm64_mesh
           COMMAND ${Python3_EXECUTABLE} ${CMAKE_CURRENT_LIST_DIR}/arm64_mesh_test.py
                   --testbed ${MESH_SOURCE_ROOT}/scripts/testbed
                   --meshagent $<TARGET_FILE:meshagent> --meshctl $<TARGET_FILE:meshctl>
                   --emulator "${CMAKE_CROSSCOMPILING_EMULATOR}"
                   --dir ${CMAKE_CURRENT_BINARY_DIR}/arm64-mesh)
  set_tests_properties(arm64_mesh PROPERTIES LABELS arm64 RUN_SERIAL TRUE TIMEOUT 600 SKIP_RETURN_CODE 77)
else()
  add_test(NAME arm64_cross
           COMMAND sh -c "if [ \"$MESH_ARM64\" != 1 ]; then echo 'SKIPPED: set MESH_ARM64=1 to cross-build for arm64 and run the unit tests and a 3-agent arm64 mesh under qemu-user (scripts/cross-build --tests, ~25 min)'; exit 77; fi; exec \"$0\" --tests"
                   ${MESH_SOURCE_ROOT}/scripts/cross-build)
  set_tests_properties(arm64_cross PROPERTIES LABELS arm64 RUN_SERIAL TRUE TIMEOUT 3600 SKIP_RETURN_CODE 77)
endif()
