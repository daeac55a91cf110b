// The one thing braid-perf needs from MPI: rank 0's unique id on every rank. Open MPI's
// libmpi.so.40 is loaded with dlopen at run time, so braid-perf neither links MPI nor needs it
// installed. MPI_COMM_WORLD and MPI_BYTE are Open MPI's global objects (ompi_mpi_comm_world,
// ompi_mpi_byte): other MPI libraries are not supported this way; with them, set
// NCCL_COMM_ID=host:port so that every rank derives the id itself.
#pragma once
#include <string>

namespace braid::perf {

class OpenMpi {
 public:
  OpenMpi() = default;
  ~OpenMpi();  // MPI_Finalize, if we initialised it
  OpenMpi(const OpenMpi&) = delete;
  OpenMpi& operator=(const OpenMpi&) = delete;

  // dlopen + MPI_Init; false with a reason when Open MPI is not there.
  bool start(std::string* error);
  int rank() const;
  int size() const;
  // MPI_Bcast of `bytes` bytes from `root` over MPI_COMM_WORLD; false on an MPI error.
  bool broadcast(void* data, int bytes, int root);

 private:
  struct Api;
  Api* api_ = nullptr;
  bool initialisedHere_ = false;
};

}  // namespace braid::perf
