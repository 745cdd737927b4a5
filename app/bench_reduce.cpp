// `tinylens-cli bench reduce`: the large reductions that the renderer splits
// across a work-group on devices with local memory (core/codegen/render.cpp):
// a softmax over 1000 classes (computed by the kernel that reads its
// maximum and sum, a work-group a row: schedule.cpp's fuse_rows), a global average pool of 1280 7x7 maps and a
// bias gradient (a sum over N*H*W per channel). TINYLENS_REDUCE=serial renders
// them one work-item per output instead; scripts/bench reduce runs both.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include "core/profile.h"
#include "core/tensor.h"

using namespace tl;

int cmd_bench_reduce(const std::vector<std::string>& devices, int64_t batch, int repeat) {
  struct Case {
    std::string name;
    Shape shape;
    std::function<Tensor(const Tensor&)> run;
  };
  const std::vector<Case> cases = {
      {"softmax over 1000 classes", {batch, 1000}, [](const Tensor& x) { return x.softmax(-1); }},
      {"global average pool 1280x7x7", {batch, 1280, 7, 7}, [](const Tensor& x) { return x.mean({2, 3}); }},
      {"bias gradient, sum of 64x28x28 per channel", {16 * batch, 64, 28, 28},
       [](const Tensor& x) { return x.sum({0, 2, 3}); }},
  };
  for (const auto& dev : devices) {
    for (const auto& c : cases) {
      Generator gen(0);
      Tensor x = Tensor::randn(c.shape, gen, dev);
      x.realize();
      double wall = 1e30, kernels = 1e30;
      std::string form = "serial";
      for (int r = 0; r < repeat + 1; ++r) {
        ProfileCapture cap;
        const auto t0 = std::chrono::steady_clock::now();
        c.run(x).realize();
        const double dt = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        for (auto& rec : cap.records())
          if ((rec.kernel->name.rfind("R_", 0) == 0 || rec.kernel->name.rfind("ROWS_", 0) == 0) && rec.kernel->local[0] > 0)
            form = "grouped, work-group " + std::to_string(rec.kernel->local[0]);
        if (r == 0) continue;  // the first run compiles
        wall = std::min(wall, dt);
        kernels = std::min(kernels, cap.total_seconds());
      }
      std::printf("%-44s batch %lld on %s: %.3f ms wall, %.3f ms in kernels (%s)\n", c.name.c_str(),
                  (long long)batch, dev.c_str(), wall * 1e3, kernels * 1e3, form.c_str());
    }
  }
  return 0;
}
