#include "perf/perf_mpi.h"

#include <dlfcn.h>

namespace braid::perf {

// Open MPI's handles are pointers to its global objects; functions are called through them.
struct OpenMpi::Api {
  void* library = nullptr;
  int (*init)(int*, char***) = nullptr;
  int (*initialized)(int*) = nullptr;
  int (*finalize)() = nullptr;
  int (*commRank)(void*, int*) = nullptr;
  int (*commSize)(void*, int*) = nullptr;
  int (*bcast)(void*, int, void*, int, void*) = nullptr;
  void* commWorld = nullptr;
  void* byteType = nullptr;
};

namespace {

template <typename F>
bool bind(void* library, const char* name, F* out, std::string* missing) {
  *out = reinterpret_cast<F>(dlsym(library, name));
  if (*out == nullptr) *missing = name;
  return *out != nullptr;
}

}  // namespace

bool OpenMpi::start(std::string* error) {
  auto api = new Api;
  const char* names[] = {"libmpi.so.40", "libmpi.so"};
  std::string dlErrors;
  for (const char* name : names) {
    // RTLD_GLOBAL: Open MPI's own plugins resolve symbols of libmpi.
    api->library = dlopen(name, RTLD_NOW | RTLD_GLOBAL);
    if (api->library) break;
    const char* why = dlerror();
    dlErrors += std::string(dlErrors.empty() ? "" : "; ") + (why ? why : name);
  }
  if (api->library == nullptr) {
    *error = "cannot load Open MPI (" + dlErrors + ")";
    delete api;
    return false;
  }
  std::string missing;
  bool ok = bind(api->library, "MPI_Init", &api->init, &missing) &&
            bind(api->library, "MPI_Initialized", &api->initialized, &missing) &&
            bind(api->library, "MPI_Finalize", &api->finalize, &missing) &&
            bind(api->library, "MPI_Comm_rank", &api->commRank, &missing) &&
            bind(api->library, "MPI_Comm_size", &api->commSize, &missing) &&
            bind(api->library, "MPI_Bcast", &api->bcast, &missing);
  if (ok) {
    api->commWorld = dlsym(api->library, "ompi_mpi_comm_world");
    api->byteType = dlsym(api->library, "ompi_mpi_byte");
    if (!api->commWorld || !api->byteType) {
      ok = false;
      missing = "ompi_mpi_comm_world/ompi_mpi_byte (not Open MPI?)";
    }
  }
  if (!ok) {
    *error = "the MPI library lacks " + missing;
    dlclose(api->library);
    delete api;
    return false;
  }
  api_ = api;
  int already = 0;
  if (api_->initialized(&already) != 0) {
    *error = "MPI_Initialized failed";
    return false;
  }
  if (!already) {
    if (api_->init(nullptr, nullptr) != 0) {
      *error = "MPI_Init failed";
      return false;
    }
    initialisedHere_ = true;
  }
  return true;
}

int OpenMpi::rank() const {
  int r = -1;
  if (api_ && api_->commRank(api_->commWorld, &r) != 0) r = -1;
  return r;
}

int OpenMpi::size() const {
  int s = -1;
  if (api_ && api_->commSize(api_->commWorld, &s) != 0) s = -1;
  return s;
}

bool OpenMpi::broadcast(void* data, int bytes, int root) {
  return api_ && api_->bcast(data, bytes, api_->byteType, root, api_->commWorld) == 0;
}

OpenMpi::~OpenMpi() {
  if (api_ == nullptr) return;
  if (initialisedHere_) (void)api_->finalize();  // at exit: nothing to do with an error
  // The library stays loaded: Open MPI does not support being unloaded.
  delete api_;
}

}  // namespace braid::perf
