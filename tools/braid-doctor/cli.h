// braid-doctor's command line.
#pragma once
#include <cstdio>
#include <string>
#include <vector>

namespace braid::doctor {

struct CliOptions {
  bool quick = false;
  bool help = false;
  std::string jsonPath, plotPath;
  std::vector<std::string> skip;  // part names, checked against partNames()
};

// The parts in the order they run: the inventory's, then the measurements'.
const std::vector<std::string>& partNames();
bool isMeasurementPart(const std::string& part);
// False with *error on a bad command line (unknown flag, missing value, unknown part).
bool parseCli(int argc, char** argv, CliOptions* out, std::string* error);
void printUsage(FILE* out);

}  // namespace braid::doctor
