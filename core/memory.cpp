#include "core/memory.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <set>

namespace tl {

MemoryProfile memory_profile(const std::vector<ProfileRecord>& records) {
  MemoryProfile m;
  const size_t n = records.size();
  std::map<uint64_t, size_t> current;  // buffer -> index of its value in m.values
  std::map<uint64_t, int> tenants;     // buffer -> values it held so far
  std::map<uint64_t, size_t> inputs;   // read before any write: bytes
  for (size_t i = 0; i < n; ++i) {
    const ProfileRecord& r = records[i];
    const auto& b = r.buffers;
    if (r.kernel->assembled || b.output == 0) continue;  // not launched: its pieces wrote it
    for (auto& [id, bytes] : b.inputs) {
      auto it = current.find(id);
      if (it == current.end()) {
        inputs.emplace(id, bytes);
        continue;
      }
      MemoryValue& v = m.values[it->second];
      if (v.readers.empty() || v.readers.back() != i) v.readers.push_back(i);
      v.last = std::max(v.last, i);
    }
    auto it = current.find(b.output);
    // Written again after its value was read (or a value that was only ever
    // written, then overwritten): a new value in the same buffer.
    if (it == current.end() || !m.values[it->second].readers.empty()) {
      MemoryValue v;
      v.buffer = b.output;
      v.bytes = b.output_bytes;
      v.value_bytes = b.value_bytes;
      v.device = r.kernel->device;
      v.first = v.last = i;
      v.tenant = tenants[b.output]++;
      current[b.output] = m.values.size();
      m.values.push_back(v);
      it = current.find(b.output);
    }
    MemoryValue& v = m.values[it->second];
    v.writers.push_back(i);
    v.last = std::max(v.last, i);
    v.kept = v.kept || b.kept;
  }
  m.live_bytes.assign(n, 0);
  for (auto& v : m.values) {
    if (v.kept && n > 0) v.last = n - 1;
    for (size_t i = v.first; i <= v.last && i < n; ++i) m.live_bytes[i] += v.bytes;
  }
  for (size_t i = 0; i < n; ++i)
    if (m.live_bytes[i] > m.peak_bytes) m.peak_bytes = m.live_bytes[i], m.peak_launch = i;
  for (auto& [id, count] : tenants) {
    ++m.buffers;
    m.reused_buffers += count > 1;
  }
  std::set<uint64_t> counted;
  for (auto& v : m.values)
    if (counted.insert(v.buffer).second) m.buffer_bytes += v.bytes;
  for (auto& [id, bytes] : inputs)
    if (!tenants.count(id)) ++m.input_buffers, m.input_bytes += bytes;
  return m;
}

namespace {
std::string mib(size_t bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3f MiB", double(bytes) / (1024.0 * 1024.0));
  return buf;
}
std::string list(const std::vector<size_t>& v) {
  std::string s;
  for (size_t i = 0; i < v.size() && i < 6; ++i) s += (i ? "," : "") + std::to_string(v[i]);
  if (v.size() > 6) s += ",...(" + std::to_string(v.size()) + ")";
  return s.empty() ? "-" : s;
}
}  // namespace

std::string format_memory(const MemoryProfile& m, const std::vector<ProfileRecord>& records) {
  std::string out = "memory: peak " + mib(m.peak_bytes) + " live at launch " + std::to_string(m.peak_launch);
  if (m.peak_launch < records.size()) out += " (" + records[m.peak_launch].kernel->name + ")";
  out += "; " + std::to_string(m.values.size()) + " values in " + std::to_string(m.buffers) + " buffers (" +
         mib(m.buffer_bytes) + "), " + std::to_string(m.reused_buffers) + " reused; read only (weights, inputs): " +
         std::to_string(m.input_buffers) + " buffers, " + mib(m.input_bytes) + "\n";
  char line[256];
  size_t top = std::max<size_t>(m.peak_bytes, 1);
  out += "live memory per launch:\n";
  for (size_t i = 0; i < m.live_bytes.size(); ++i) {
    const int width = int(40.0 * double(m.live_bytes[i]) / double(top) + 0.5);
    std::snprintf(line, sizeof line, "%4zu  %-28s %12s  %s\n", i, records[i].kernel->name.c_str(),
                  mib(m.live_bytes[i]).c_str(), std::string(size_t(width), '#').c_str());
    out += line;
  }
  std::snprintf(line, sizeof line, "%5s %12s %12s  %-28s %-16s %-9s %s\n", "value", "size", "buffer size", "writer",
                "readers", "live", "buffer");
  out += line;
  for (size_t i = 0; i < m.values.size(); ++i) {
    const MemoryValue& v = m.values[i];
    const std::string live = std::to_string(v.first) + "-" + std::to_string(v.last) + (v.kept ? "+" : "");
    std::string buffer = v.tenant ? "reused (value " + std::to_string(v.tenant + 1) + " in it)" : "new";
    std::snprintf(line, sizeof line, "%5zu %12s %12s  %-28s %-16s %-9s %s\n", i, mib(v.value_bytes).c_str(), mib(v.bytes).c_str(),
                  records[v.writers.front()].kernel->name.c_str(), list(v.readers).c_str(), live.c_str(),
                  buffer.c_str());
    out += line;
  }
  return out + "(live: the launches a value is held for, from its write to its last read; + kept after the run)\n";
}

}  // namespace tl
