# Kernel routes (agent/runtime/kernel_routes.h), included from tests/agent/runtime/CMakeLists.txt.
# One source, two binaries: kernel_routes_test checks the rtnetlink decoders and
# the sync planner on hand-built input (no privileges); kernel_routes_netns_test
# drives the real kernel inside a network namespace it creates and drops (root;
# each test skips with a printed reason otherwise).
mesh_test(kernel_routes_test LABEL unit
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/kernel_routes_test.cc
  LIBS mesh_kernel_routes)
mesh_test(kernel_routes_netns_test LABEL testbed
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/kernel_routes_test.cc
  LIBS mesh_kernel_routes)
target_compile_definitions(kernel_routes_netns_test PRIVATE KERNEL_ROUTES_NETNS_TESTS)
