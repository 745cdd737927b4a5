#include "core/profile.h"

#include <chrono>
#include <cstdio>

namespace tl {

namespace {
thread_local ProfileCapture* current_capture = nullptr;
}

ProfileCapture::ProfileCapture(bool timed) : timed_(timed), parent_(current_capture) { current_capture = this; }
ProfileCapture::~ProfileCapture() { current_capture = parent_; }

void ProfileCapture::add(const ProfileRecord& r) {
  for (auto* c = current_capture; c; c = c->parent_) c->records_.push_back(r);
}

double steady_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

bool ProfileCapture::active() { return current_capture != nullptr; }

bool ProfileCapture::timed() {
  for (auto* c = current_capture; c; c = c->parent_)
    if (c->timed_) return true;
  return false;
}

double ProfileCapture::total_seconds() const {
  double t = 0;
  for (auto& r : records_) t += r.seconds;
  return t;
}

ProfileTotals profile_totals(const std::vector<ProfileRecord>& records) {
  ProfileTotals t;
  for (auto& r : records) {
    ++t.kernels;
    t.replayed += r.replayed;
    t.kernel_seconds += r.seconds;
    t.wall_seconds += r.realize_wall;
    t.compile_seconds += r.compile_seconds;
  }
  return t;
}

std::string format_profile_totals(const ProfileTotals& t) {
  char line[256];
  std::snprintf(line, sizeof line, "%zu kernels (%zu replayed): wall %.3f ms = kernels %.3f ms + host overhead %.3f ms",
                t.kernels, t.replayed, t.wall_seconds * 1e3, t.kernel_seconds * 1e3, t.host_overhead() * 1e3);
  std::string out = line;
  if (t.compile_seconds > 0) {
    std::snprintf(line, sizeof line, " (compiles %.3f ms not counted)", t.compile_seconds * 1e3);
    out += line;
  }
  return out;
}

const char* run_label(const ProfileRecord& r) {
  return r.kernel->assembled ? "assembled in place" : r.replayed ? "replayed" : "planned";
}

std::string format_tune_line(const KernelInfo& k) {
  if (k.tuned.empty()) return "";
  char num[64];
  double best = 0;
  std::string others;
  for (auto& [label, seconds] : k.tune_candidates) {
    std::snprintf(num, sizeof num, " %.1f", seconds * 1e6);
    if (label == k.tuned)
      best = seconds;
    else
      others += (others.empty() ? "" : ",") + (" " + label) + num;
  }
  std::snprintf(num, sizeof num, " %.1f us (", best * 1e6);
  return "tuned: " + k.tuned + num + (k.tune_searched ? "searched" : "from the cache") +
         (others.empty() ? "" : ";" + others) + ")";
}

std::string format_profile_table(const std::vector<ProfileRecord>& records) {
  std::string out;
  char line[512];
  std::snprintf(line, sizeof line, "%4s  %-28s %-14s %-18s %10s %9s %9s  %s\n", "#", "kernel", "device", "launch",
                "time (us)", "GFLOP/s", "GB/s", "run");
  out += line;
  for (size_t i = 0; i < records.size(); ++i) {
    auto& r = records[i];
    auto& k = *r.kernel;
    std::string launch = std::to_string(k.global[0]);
    if (k.global[1] > 1 || k.global[2] > 1) launch += "x" + std::to_string(k.global[1]) + "x" + std::to_string(k.global[2]);
    if (k.local[0] > 0) launch += "/" + std::to_string(k.local[0]);
    std::snprintf(line, sizeof line, "%4zu  %-28s %-14s %-18s %10.1f %9.2f %9.2f  %s\n", i, k.name.c_str(),
                  k.device.c_str(), launch.c_str(), r.seconds * 1e6, r.gflops(), r.gbps(),
                  run_label(r));
    out += line;
    if (!k.tuned.empty()) out += "      " + format_tune_line(k) + "\n";
  }
  out += format_profile_totals(profile_totals(records)) + "\n";
  return out;
}

}  // namespace tl
