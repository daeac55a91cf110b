/*
 * braid: the NCCL API, source- and binary-compatible with NCCL 2.28.9.
 *
 * A program compiled against NVIDIA's nccl.h 2.28.9 runs unchanged on libbraid.so (soname
 * libnccl.so.2), and a program compiled against this file runs on the real libnccl.so.2.
 * Every type layout, enum value, macro and prototype here matches that release; the test in
 * tests/unit/abi compares them field by field. The include guard is NCCL_H_ on purpose: this
 * header and NVIDIA's can never both end up in one translation unit.
 *
 * braid's own additions live in <braid/...>, never here.
 */
#ifndef NCCL_H_
#define NCCL_H_

#include <cuda_runtime.h>
#include <cuda_fp16.h>
#if CUDART_VERSION >= 11000
#include <cuda_bf16.h>
#endif
#if defined(__cplusplus) && CUDART_VERSION >= 11080
#include <cuda_fp8.h>
#endif
#include <limits.h>

/* ---- Version ------------------------------------------------------------------------------ */

/* The NCCL release this API corresponds to (braid's own version: <braid/version.h>). */
#define NCCL_MAJOR 2
#define NCCL_MINOR 28
#define NCCL_PATCH 9
#define NCCL_SUFFIX ""

/* Releases up to 2.8 were coded as X*1000+Y*100+Z, later ones as X*10000+Y*100+Z. */
#define NCCL_VERSION(X, Y, Z) \
  (((X) <= 2 && (Y) <= 8) ? (X) * 1000 + (Y) * 100 + (Z) : (X) * 10000 + (Y) * 100 + (Z))
#define NCCL_VERSION_CODE 22809

#ifdef __cplusplus
extern "C" {
#endif

/* ---- Handles ------------------------------------------------------------------------------ */

/* A communicator: one rank's membership in a group of ranks. */
typedef struct ncclComm* ncclComm_t;
#define NCCL_COMM_NULL NULL

/* A registered memory window (ncclCommWindowRegister). */
typedef struct ncclWindow_vidmem* ncclWindow_t;

/* Rendezvous token made by ncclGetUniqueId on one rank and handed to all others; passed by value. */
#define NCCL_UNIQUE_ID_BYTES 128
typedef struct {
  char internal[NCCL_UNIQUE_ID_BYTES];
} ncclUniqueId;

/* ---- Result codes ------------------------------------------------------------------------- */

typedef enum {
  ncclSuccess = 0,
  ncclUnhandledCudaError = 1, /* a CUDA call failed */
  ncclSystemError = 2,        /* a system call failed */
  ncclInternalError = 3,      /* a bug in the library */
  ncclInvalidArgument = 4,    /* a bad value was passed */
  ncclInvalidUsage = 5,       /* the call is not allowed here (or not supported) */
  ncclRemoteError = 6,        /* a peer died or the network failed */
  ncclInProgress = 7,         /* a non-blocking operation has not finished yet */
  ncclNumResults = 8
} ncclResult_t;

/* ---- Constants and flags ------------------------------------------------------------------ */

/* "Not set" markers for ncclConfig_t fields: the library then picks its default. */
#define NCCL_CONFIG_UNDEF_INT INT_MIN
#define NCCL_CONFIG_UNDEF_PTR NULL
#define NCCL_UNDEF_FLOAT -1.0f

/* ncclCommSplit color for a rank that joins no new communicator (it gets NULL). */
#define NCCL_SPLIT_NOCOLOR -1

/* ncclCommWindowRegister flags, and the alignment a symmetric window needs. */
#define NCCL_WIN_DEFAULT 0x00
#define NCCL_WIN_COLL_SYMMETRIC 0x01
#define NCCL_WIN_REQUIRED_ALIGNMENT 4096

/* ncclConfig_t.CTAPolicy values. */
#define NCCL_CTA_POLICY_DEFAULT 0x00
#define NCCL_CTA_POLICY_EFFICIENCY 0x01
#define NCCL_CTA_POLICY_ZERO 0x02

/* ncclCommShrink flags: shrink a healthy parent, or abort its pending work first. */
#define NCCL_SHRINK_DEFAULT 0x00
#define NCCL_SHRINK_ABORT 0x01

/* ncclCommRevoke flags: 0 is the only accepted value. */
#define NCCL_REVOKE_DEFAULT 0x00

/* ---- Communicator configuration ----------------------------------------------------------- */

/* Options for ncclCommInitRankConfig / Split / Shrink / InitRankScalable. Always start from
 * NCCL_CONFIG_INITIALIZER: size, magic and version let the library accept structs written by
 * older or newer headers. 80 bytes on LP64. */
typedef struct ncclConfig_v22800 {
  size_t size;           /* sizeof(ncclConfig_t) of the caller's header */
  unsigned int magic;    /* 0xcafebeef */
  unsigned int version;  /* NCCL_VERSION_CODE of the caller's header */
  int blocking;          /* 0: init/collectives may return ncclInProgress */
  int cgaClusterSize;
  int minCTAs;
  int maxCTAs;
  const char* netName;
  int splitShare;        /* children of ncclCommSplit share the parent's resources */
  int trafficClass;
  const char* commName;  /* shown in logs */
  int collnetEnable;
  int CTAPolicy;         /* NCCL_CTA_POLICY_* */
  int shrinkShare;       /* like splitShare, for ncclCommShrink */
  int nvlsCTAs;
  int nChannelsPerNetPeer;
  int nvlinkCentricSched;
} ncclConfig_t;

#define NCCL_CONFIG_INITIALIZER                                            \
  {                                                                        \
    sizeof(ncclConfig_t),                              /* size */          \
    0xcafebeef,                                        /* magic */         \
    NCCL_VERSION(NCCL_MAJOR, NCCL_MINOR, NCCL_PATCH),  /* version */       \
    NCCL_CONFIG_UNDEF_INT,                             /* blocking */      \
    NCCL_CONFIG_UNDEF_INT,                             /* cgaClusterSize */\
    NCCL_CONFIG_UNDEF_INT,                             /* minCTAs */       \
    NCCL_CONFIG_UNDEF_INT,                             /* maxCTAs */       \
    NCCL_CONFIG_UNDEF_PTR,                             /* netName */       \
    NCCL_CONFIG_UNDEF_INT,                             /* splitShare */    \
    NCCL_CONFIG_UNDEF_INT,                             /* trafficClass */  \
    NCCL_CONFIG_UNDEF_PTR,                             /* commName */      \
    NCCL_CONFIG_UNDEF_INT,                             /* collnetEnable */ \
    NCCL_CONFIG_UNDEF_INT,                             /* CTAPolicy */     \
    NCCL_CONFIG_UNDEF_INT,                             /* shrinkShare */   \
    NCCL_CONFIG_UNDEF_INT,                             /* nvlsCTAs */      \
    NCCL_CONFIG_UNDEF_INT,                             /* nChannelsPerNetPeer */ \
    NCCL_CONFIG_UNDEF_INT                              /* nvlinkCentricSched */  \
  }

/* Output of ncclGroupSimulateEnd. Same size/magic/version protocol as ncclConfig_t. */
typedef struct ncclSimInfo_v22200 {
  size_t size;
  unsigned int magic;    /* 0x74685283 */
  unsigned int version;
  float estimatedTime;   /* microseconds the group would take */
} ncclSimInfo_t;

#define NCCL_SIM_INFO_INITIALIZER                          \
  {                                                        \
    sizeof(ncclSimInfo_t),                                 \
    0x74685283,                                            \
    NCCL_VERSION(NCCL_MAJOR, NCCL_MINOR, NCCL_PATCH),      \
    NCCL_UNDEF_FLOAT                                       \
  }

/* ---- Reduction operators and data types --------------------------------------------------- */

/* Exists only so that ncclMaxRedOp below can be the largest value an enum of this size holds. */
typedef enum { ncclNumOps_dummy = 5 } ncclRedOp_dummy_t;

typedef enum {
  ncclSum = 0,
  ncclProd = 1,
  ncclMax = 2,
  ncclMin = 3,
  ncclAvg = 4,
  /* Count of built-in operators; ops made by ncclRedOpCreatePreMulSum are >= this. */
  ncclNumOps = 5,
  /* Largest legal value; keeps sizeof(ncclRedOp_t) equal to a plain enum's. */
  ncclMaxRedOp = 0x7fffffff >> (32 - 8 * sizeof(ncclRedOp_dummy_t))
} ncclRedOp_t;

typedef enum {
  ncclInt8 = 0,
  ncclChar = 0,
  ncclUint8 = 1,
  ncclInt32 = 2,
  ncclInt = 2,
  ncclUint32 = 3,
  ncclInt64 = 4,
  ncclUint64 = 5,
  ncclFloat16 = 6,
  ncclHalf = 6,
  ncclFloat32 = 7,
  ncclFloat = 7,
  ncclFloat64 = 8,
  ncclDouble = 8,
  ncclBfloat16 = 9,
  ncclFloat8e4m3 = 10,
  ncclFloat8e5m2 = 11,
  ncclNumTypes = 12
} ncclDataType_t;

/* Where the scalar of ncclRedOpCreatePreMulSum lives. */
typedef enum {
  ncclScalarDevice = 0,        /* device memory, read by the kernel when the collective runs */
  ncclScalarHostImmediate = 1  /* host memory, read once before the create call returns */
} ncclScalarResidence_t;

/* ---- Functions ----------------------------------------------------------------------------
 * Each function also exists as pnccl<Name> (the profiling interface): nccl<Name> is a weak
 * alias of it, so a profiler can define nccl<Name> itself and forward to pnccl<Name>. */

/* Memory suitable for every optimisation (registration, windows); size may be rounded up. */
ncclResult_t ncclMemAlloc(void** ptr, size_t size);
ncclResult_t pncclMemAlloc(void** ptr, size_t size);
ncclResult_t ncclMemFree(void* ptr);
ncclResult_t pncclMemFree(void* ptr);

/* Stores NCCL_VERSION_CODE of the library (not of the header) in *version. */
ncclResult_t ncclGetVersion(int* version);
ncclResult_t pncclGetVersion(int* version);

/* Makes a new rendezvous id; call once and pass the id to every rank. */
ncclResult_t ncclGetUniqueId(ncclUniqueId* uniqueId);
ncclResult_t pncclGetUniqueId(ncclUniqueId* uniqueId);

/* Joins rank `rank` of `nranks` to the communicator named by commId (collective over the ranks);
 * config may be NULL for defaults. */
ncclResult_t ncclCommInitRankConfig(ncclComm_t* comm, int nranks, ncclUniqueId commId, int rank,
                                    ncclConfig_t* config);
ncclResult_t pncclCommInitRankConfig(ncclComm_t* comm, int nranks, ncclUniqueId commId, int rank,
                                     ncclConfig_t* config);

/* ncclCommInitRankConfig with a NULL config. */
ncclResult_t ncclCommInitRank(ncclComm_t* comm, int nranks, ncclUniqueId commId, int rank);
ncclResult_t pncclCommInitRank(ncclComm_t* comm, int nranks, ncclUniqueId commId, int rank);

/* Creates ndev communicators in one process, one per device in devlist (NULL: 0..ndev-1). */
ncclResult_t ncclCommInitAll(ncclComm_t* comm, int ndev, const int* devlist);
ncclResult_t pncclCommInitAll(ncclComm_t* comm, int ndev, const int* devlist);

/* Flushes outstanding work; the comm reports ncclInProgress until it is quiescent. */
ncclResult_t ncclCommFinalize(ncclComm_t comm);
ncclResult_t pncclCommFinalize(ncclComm_t comm);

/* Frees the communicator's local resources. */
ncclResult_t ncclCommDestroy(ncclComm_t comm);
ncclResult_t pncclCommDestroy(ncclComm_t comm);

/* Stops pending work (also on the device) and frees the communicator. */
ncclResult_t ncclCommAbort(ncclComm_t comm);
ncclResult_t pncclCommAbort(ncclComm_t comm);

/* Stops in-flight work and leaves the comm usable only for destroy/split/shrink.
 * revokeFlags must be NCCL_REVOKE_DEFAULT. */
ncclResult_t ncclCommRevoke(ncclComm_t comm, int revokeFlags);
ncclResult_t pncclCommRevoke(ncclComm_t comm, int revokeFlags);

/* Ranks with equal color form a new communicator, ordered by key; NCCL_SPLIT_NOCOLOR yields
 * NULL. A NULL config inherits the parent's. */
ncclResult_t ncclCommSplit(ncclComm_t comm, int color, int key, ncclComm_t* newcomm, ncclConfig_t* config);
ncclResult_t pncclCommSplit(ncclComm_t comm, int color, int key, ncclComm_t* newcomm, ncclConfig_t* config);

/* New communicator without the listed ranks; shrinkFlags is NCCL_SHRINK_*. */
ncclResult_t ncclCommShrink(ncclComm_t comm, int* excludeRanksList, int excludeRanksCount, ncclComm_t* newcomm,
                            ncclConfig_t* config, int shrinkFlags);
ncclResult_t pncclCommShrink(ncclComm_t comm, int* excludeRanksList, int excludeRanksCount, ncclComm_t* newcomm,
                             ncclConfig_t* config, int shrinkFlags);

/* Like ncclCommInitRankConfig, with nId ids (the same list on every rank) to spread the
 * rendezvous load. */
ncclResult_t ncclCommInitRankScalable(ncclComm_t* newcomm, int nranks, int myrank, int nId,
                                      ncclUniqueId* commIds, ncclConfig_t* config);
ncclResult_t pncclCommInitRankScalable(ncclComm_t* newcomm, int nranks, int myrank, int nId,
                                       ncclUniqueId* commIds, ncclConfig_t* config);

/* Fixed text for a result code. */
const char* ncclGetErrorString(ncclResult_t result);
const char* pncclGetErrorString(ncclResult_t result);

/* Text of the most recent error in this process (comm is ignored). */
const char* ncclGetLastError(ncclComm_t comm);
const char* pncclGetLastError(ncclComm_t comm);

/* Re-reads the logging environment variables. Not part of the supported API. */
__attribute__((deprecated("ncclResetDebugInit is not supported as part of the NCCL API and will be removed in the future")))
void ncclResetDebugInit(void);
__attribute__((deprecated("pncclResetDebugInit is not supported as part of the NCCL API and will be removed in the future")))
void pncclResetDebugInit(void);

/* The first asynchronous error the communicator hit, or ncclInProgress while a non-blocking
 * operation is still running. */
ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t* asyncError);
ncclResult_t pncclCommGetAsyncError(ncclComm_t comm, ncclResult_t* asyncError);

/* Rank count, CUDA device and rank of a communicator. */
ncclResult_t ncclCommCount(const ncclComm_t comm, int* count);
ncclResult_t pncclCommCount(const ncclComm_t comm, int* count);
ncclResult_t ncclCommCuDevice(const ncclComm_t comm, int* device);
ncclResult_t pncclCommCuDevice(const ncclComm_t comm, int* device);
ncclResult_t ncclCommUserRank(const ncclComm_t comm, int* rank);
ncclResult_t pncclCommUserRank(const ncclComm_t comm, int* rank);

/* Local buffer registration for zero-copy transfers. */
ncclResult_t ncclCommRegister(const ncclComm_t comm, void* buff, size_t size, void** handle);
ncclResult_t pncclCommRegister(const ncclComm_t comm, void* buff, size_t size, void** handle);
ncclResult_t ncclCommDeregister(const ncclComm_t comm, void* handle);
ncclResult_t pncclCommDeregister(const ncclComm_t comm, void* handle);

/* Collective registration of a memory window (NCCL_WIN_* flags). */
ncclResult_t ncclCommWindowRegister(ncclComm_t comm, void* buff, size_t size, ncclWindow_t* win, int winFlags);
ncclResult_t pncclCommWindowRegister(ncclComm_t comm, void* buff, size_t size, ncclWindow_t* win, int winFlags);
ncclResult_t ncclCommWindowDeregister(ncclComm_t comm, ncclWindow_t win);
ncclResult_t pncclCommWindowDeregister(ncclComm_t comm, ncclWindow_t win);

/* A sum whose inputs are first multiplied by *scalar; valid on `comm` for `datatype` only. */
ncclResult_t ncclRedOpCreatePreMulSum(ncclRedOp_t* op, void* scalar, ncclDataType_t datatype,
                                      ncclScalarResidence_t residence, ncclComm_t comm);
ncclResult_t pncclRedOpCreatePreMulSum(ncclRedOp_t* op, void* scalar, ncclDataType_t datatype,
                                       ncclScalarResidence_t residence, ncclComm_t comm);

/* Releases an operator from ncclRedOpCreatePreMulSum once no call using it is pending. */
ncclResult_t ncclRedOpDestroy(ncclRedOp_t op, ncclComm_t comm);
ncclResult_t pncclRedOpDestroy(ncclRedOp_t op, ncclComm_t comm);

/* ---- Collectives: enqueued on `stream`; every rank of comm makes the same call. ----------
 * In-place forms are noted per call. Counts are in elements of `datatype`. */

/* Reduce into recvbuff on `root` (recvbuff unused elsewhere). In place: sendbuff == recvbuff. */
ncclResult_t ncclReduce(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                        ncclRedOp_t op, int root, ncclComm_t comm, cudaStream_t stream);
ncclResult_t pncclReduce(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                         ncclRedOp_t op, int root, ncclComm_t comm, cudaStream_t stream);

/* Deprecated in-place broadcast of buff from root. */
ncclResult_t ncclBcast(void* buff, size_t count, ncclDataType_t datatype, int root, ncclComm_t comm,
                       cudaStream_t stream);
ncclResult_t pncclBcast(void* buff, size_t count, ncclDataType_t datatype, int root, ncclComm_t comm,
                        cudaStream_t stream);

/* Copies root's sendbuff into every rank's recvbuff. In place: sendbuff == recvbuff. */
ncclResult_t ncclBroadcast(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                           int root, ncclComm_t comm, cudaStream_t stream);
ncclResult_t pncclBroadcast(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                            int root, ncclComm_t comm, cudaStream_t stream);

/* Reduces across ranks; every rank gets the result. In place: sendbuff == recvbuff. */
ncclResult_t ncclAllReduce(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                           ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream);
ncclResult_t pncclAllReduce(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                            ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream);

/* sendbuff holds nranks*recvcount elements; rank i receives block i of the reduction.
 * In place: recvbuff == sendbuff + rank*recvcount. */
ncclResult_t ncclReduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount, ncclDataType_t datatype,
                               ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream);
ncclResult_t pncclReduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount, ncclDataType_t datatype,
                                ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream);

/* Rank i's sendcount elements land at recvbuff + i*sendcount on every rank.
 * In place: sendbuff == recvbuff + rank*sendcount. */
ncclResult_t ncclAllGather(const void* sendbuff, void* recvbuff, size_t sendcount, ncclDataType_t datatype,
                           ncclComm_t comm, cudaStream_t stream);
ncclResult_t pncclAllGather(const void* sendbuff, void* recvbuff, size_t sendcount, ncclDataType_t datatype,
                            ncclComm_t comm, cudaStream_t stream);

/* Block j of sendbuff goes to rank j; block i of recvbuff comes from rank i (count each). */
ncclResult_t ncclAlltoAll(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                          ncclComm_t comm, cudaStream_t stream);
ncclResult_t pncclAlltoAll(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                           ncclComm_t comm, cudaStream_t stream);

/* Rank i's count elements land at recvbuff + i*count on root.
 * In place: sendbuff == recvbuff + root*count. */
ncclResult_t ncclGather(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, int root,
                        ncclComm_t comm, cudaStream_t stream);
ncclResult_t pncclGather(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, int root,
                         ncclComm_t comm, cudaStream_t stream);

/* Root's block i (sendbuff + i*count) goes to rank i's recvbuff.
 * In place: recvbuff == sendbuff + root*count. */
ncclResult_t ncclScatter(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, int root,
                         ncclComm_t comm, cudaStream_t stream);
ncclResult_t pncclScatter(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, int root,
                          ncclComm_t comm, cudaStream_t stream);

/* ---- Point to point: `peer` makes the matching call with the same count and type. Several
 * sends/recvs that must progress together go in one group. -------------------------------- */

ncclResult_t ncclSend(const void* sendbuff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm,
                      cudaStream_t stream);
ncclResult_t pncclSend(const void* sendbuff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm,
                       cudaStream_t stream);
ncclResult_t ncclRecv(void* recvbuff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm,
                      cudaStream_t stream);
ncclResult_t pncclRecv(void* recvbuff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm,
                       cudaStream_t stream);

/* ---- Groups: calls between Start and End are aggregated and launched at End. Groups nest;
 * one group may span several communicators, or hold ncclCommInitRank calls (not both). ---- */

ncclResult_t ncclGroupStart(void);
ncclResult_t pncclGroupStart(void);
ncclResult_t ncclGroupEnd(void);
ncclResult_t pncclGroupEnd(void);

/* Ends the group without running it and reports its estimated cost in *simInfo. */
ncclResult_t ncclGroupSimulateEnd(ncclSimInfo_t* simInfo);
ncclResult_t pncclGroupSimulateEnd(ncclSimInfo_t* simInfo);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* NCCL_H_ */
