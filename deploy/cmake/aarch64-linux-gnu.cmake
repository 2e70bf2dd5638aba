# Cross-compiling meshagent for 64-bit ARM (the reference target: Raspberry Pi 4
# with Raspberry Pi OS bookworm arm64, which is Debian 12 arm64) on a Debian 12
# amd64 machine, with Debian's cross toolchain and multiarch -dev packages:
#   scripts/setup --arm64     (crossbuild-essential-arm64, lib*-dev:arm64, qemu-user-static)
#   cmake -S . -B build-arm64 -G Ninja -DCMAKE_TOOLCHAIN_FILE=deploy/cmake/aarch64-linux-gnu.cmake
# or simply scripts/cross-build. No sysroot: the arm64 libraries live beside the
# native ones under /usr/lib/aarch64-linux-gnu (multiarch), headers are shared.
# protoc runs natively (protobuf-compiler of the build machine; same version).
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(CMAKE_LIBRARY_ARCHITECTURE aarch64-linux-gnu)

set(CMAKE_C_COMPILER aarch64-linux-gnu-gcc)
set(CMAKE_CXX_COMPILER aarch64-linux-gnu-g++)

# Programs (protoc, python3) from the build machine; libraries and packages
# only for the target: find_library looks in lib/aarch64-linux-gnu.
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE BOTH)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE BOTH)
set(CMAKE_FIND_ROOT_PATH /)
set(CMAKE_IGNORE_PATH /usr/lib/x86_64-linux-gnu /lib/x86_64-linux-gnu /usr/lib/x86_64-linux-gnu/cmake)

# Run target binaries (gtest discovery, man pages from --help, ctest) under
# qemu-user when it is installed; the arm64 dynamic loader and libraries come
# from the multiarch packages, so no -L prefix is needed.
find_program(MESH_QEMU_AARCH64 NAMES qemu-aarch64-static qemu-aarch64)
if(MESH_QEMU_AARCH64)
  set(CMAKE_CROSSCOMPILING_EMULATOR ${MESH_QEMU_AARCH64})
endif()

