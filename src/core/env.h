// Configuration in one place: every NCCL_* and BRAID_* variable braid reads is declared in
// env.cc with its default and a one-line description (docs/configuration.md lists them).
#pragma once
#include <cstdint>
#include <string>

namespace braid::env {

// Raw value, or nullptr when unset or empty.
const char* get(const char* name);
int64_t getInt(const char* name, int64_t fallback);
double getDouble(const char* name, double fallback);
std::string getString(const char* name, const std::string& fallback = "");

// Typed accessors for the variables braid reads more than once.
double initTimeoutSeconds();       // BRAID_INIT_TIMEOUT, default 60
int commBlockingOverride();        // NCCL_COMM_BLOCKING: 0/1, or -1 when unset

}  // namespace braid::env
