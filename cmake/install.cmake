# cmake --install: the libraries, the headers, a CMake package (find_package(braid) gives
# braid::braid) and braid.pc for pkg-config.
include(CMakePackageConfigHelpers)
install(TARGETS braid braid_static EXPORT braidTargets
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR})
install(FILES $<TARGET_FILE_DIR:braid>/libnccl.so.2 DESTINATION ${CMAKE_INSTALL_LIBDIR})
install(FILES include/nccl.h DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(DIRECTORY include/braid/ DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/braid FILES_MATCHING PATTERN "*.h")
install(FILES ${PROJECT_BINARY_DIR}/generated/braid/version.h DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/braid)
install(EXPORT braidTargets NAMESPACE braid:: DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/braid)
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/braidConfig.cmake.in
  ${PROJECT_BINARY_DIR}/braidConfig.cmake INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/braid)
write_basic_package_version_file(${PROJECT_BINARY_DIR}/braidConfigVersion.cmake COMPATIBILITY SameMajorVersion)
install(FILES ${PROJECT_BINARY_DIR}/braidConfig.cmake ${PROJECT_BINARY_DIR}/braidConfigVersion.cmake
        DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/braid)
configure_file(${PROJECT_SOURCE_DIR}/cmake/braid.pc.in ${PROJECT_BINARY_DIR}/braid.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/braid.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
