// Test-only fault injection: faultPoint("name") kills the process (SIGKILL, as a crash would)
// when BRAID_FAULT_POINT names it, so that tests can stop a rank at an exact step of a
// protocol (connection setup, say) instead of at a random time. One cached comparison when
// the variable is unset.
#pragma once

namespace braid {

void faultPoint(const char* name);

}  // namespace braid
