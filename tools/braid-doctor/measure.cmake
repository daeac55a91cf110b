# braid-doctor's GPU measurements: a static library for the doctor's binary.
# Included from tools/braid-doctor/CMakeLists.txt (or tools/CMakeLists.txt): paths are relative
# to this file's folder.
set(_braid_measure_dir ${CMAKE_CURRENT_LIST_DIR})
set(_braid_measure_sources
  ${_braid_measure_dir}/measure_util.cc
  ${_braid_measure_dir}/measure_child.cc
  ${_braid_measure_dir}/measure_driver.cc
  ${_braid_measure_dir}/measure_copies.cc
  ${_braid_measure_dir}/measure_peers.cc
  ${_braid_measure_dir}/measure_ipc.cc
  ${_braid_measure_dir}/measure_ipc_child.cc
  ${_braid_measure_dir}/measure_ipc_protocol.cc
  ${_braid_measure_dir}/measure_collectives.cc
  ${_braid_measure_dir}/measure_storage.cc)
# No CUDA language in the tree: measure_kernels_absent.cc's helpers say the kernels were not
# built (the file is empty when BRAID_HAVE_KERNELS is defined).
list(APPEND _braid_measure_sources ${_braid_measure_dir}/measure_kernels_absent.cc)
if(BRAID_ENABLE_CUDA)
  # The P2P read/write kernels, built for the same architectures as braid's kernels.
  list(APPEND _braid_measure_sources ${_braid_measure_dir}/measure_kernels.cu)
endif()
add_library(braid_doctor_measure STATIC ${_braid_measure_sources})
target_include_directories(braid_doctor_measure PUBLIC ${PROJECT_SOURCE_DIR})
# braid_topo + braid_base: NVML's NVLink counts (topo::Nvml) for the expected P2P bandwidth.
target_link_libraries(braid_doctor_measure PUBLIC braid_json braid_topo braid_base CUDA::cudart_static Threads::Threads
                                                  ${CMAKE_DL_LIBS} rt)
target_compile_options(braid_doctor_measure PRIVATE $<$<COMPILE_LANGUAGE:CXX>:${BRAID_WARNINGS}>)
if(BRAID_ENABLE_CUDA)
  set_target_properties(braid_doctor_measure PROPERTIES CUDA_ARCHITECTURES "${BRAID_CUDA_ARCHITECTURES}")
endif()
