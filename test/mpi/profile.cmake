# octorun profile and octoplan accuracy end to end on 2 MPI ranks (run_profile_test.sh): a measured
# costs file octoplan plans with, a run of that plan, the accuracy comparison, and the errors for
# a run of another plan and for the cuda backend without CUDA. Included from CMakeLists.txt here.
add_test(NAME "mpi: profile-accuracy"
         COMMAND ${OCTO_BASH} ${CMAKE_CURRENT_SOURCE_DIR}/run_profile_test.sh ${CMAKE_BINARY_DIR}/bin
                 ${PROJECT_SOURCE_DIR} ${CMAKE_CURRENT_BINARY_DIR}/work)
set_tests_properties("mpi: profile-accuracy" PROPERTIES
  LABELS mpi
  TIMEOUT 900
  SKIP_RETURN_CODE 77
  RESOURCE_LOCK mpirun)
