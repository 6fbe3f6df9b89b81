#include "proxy/cpu_affinity.hpp"

#include <cuda_runtime_api.h>
#include <pthread.h>
#include <sched.h>

#include <cctype>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "device_guard.hpp"

namespace weft {

namespace {

// "0-15,32-47" -> cpu_set_t. false on a malformed list.
bool parse_cpulist(const std::string& text, cpu_set_t* set) {
  CPU_ZERO(set);
  std::stringstream in(text);
  std::string part;
  int count = 0;
  while (std::getline(in, part, ',')) {
    if (part.empty() || !std::isdigit(static_cast<unsigned char>(part[0]))) continue;
    char* end = nullptr;
    long lo = std::strtol(part.c_str(), &end, 10);
    long hi = lo;
    if (*end == '-') hi = std::strtol(end + 1, nullptr, 10);
    for (long c = lo; c <= hi && c < CPU_SETSIZE; ++c) {
      CPU_SET(static_cast<int>(c), set);
      ++count;
    }
  }
  return count > 0;
}

std::string read_line(const std::string& path) {
  std::ifstream f(path);
  std::string line;
  std::getline(f, line);
  return line;
}

}  // namespace

std::string pin_thread_near_device(int device) {
  if (device < 0) return "not pinned (no GPU)";
  if (device >= device_count()) return "not pinned (GPU index out of range)";
  char bus[32] = {};
  if (cudaDeviceGetPCIBusId(bus, sizeof bus, device) != cudaSuccess) {
    (void)cudaGetLastError();
    return "not pinned (no PCI bus id)";
  }
  std::string id(bus);
  for (char& c : id) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  std::string list = read_line("/sys/bus/pci/devices/" + id + "/local_cpulist");
  if (list.empty()) {
    std::string node = read_line("/sys/bus/pci/devices/" + id + "/numa_node");
    if (!node.empty() && node != "-1")
      list = read_line("/sys/devices/system/node/node" + node + "/cpulist");
  }
  cpu_set_t set;
  if (list.empty() || !parse_cpulist(list, &set)) return "not pinned (no CPU list for " + id + ")";
  if (pthread_setaffinity_np(pthread_self(), sizeof set, &set) != 0)
    return "not pinned (affinity refused for cpus " + list + ")";
  return "cpus " + list + " (near GPU " + id + ")";
}

}  // namespace weft
