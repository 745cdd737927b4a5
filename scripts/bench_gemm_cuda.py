#!/usr/bin/env python3
"""Times kernels/gemm.cu's tiles on products from the zoo at batch 64, beside
cuBLAS, without the rest of tinylens: renders the template (as
core/codegen/gemm_cuda.cpp does, identity epilogue) for each product and each
tile into one CUDA program, which times each kernel (median of REPS launches,
CUDA events) beside cuBLAS's SGEMM (fp32, no TF32) and checks it against
cuBLAS (plain B) or times cuBLAS on the im2col-sized product (gathered B).
  scripts/bench_gemm_cuda.py OUT.cu [LABEL:TEMPLATE:TMxTNxTKxWMxWN ...]
  nvcc -O3 -arch=sm_90 -fmad=false -o OUT OUT.cu -lcublas && ./OUT [REPS]
Without tiles: kernels/gemm.cu with every tile of gemm_cuda.cpp's table.
scripts/bench-gpu's tiles section does all three on the GPU machine."""
import os, re, sys
HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_TILES = ["128x128x8x8x8", "128x64x8x8x8", "64x64x8x4x8", "32x64x16x4x4", "32x32x16x4x4"]
# (name, batch, M, N, K, gather of a convolution's image or None)
def G(c, h, k, st=1, p=None):  # a conv's gather: channels, square map, window, stride
    p = k // 2 if p is None else p
    return dict(c=c, h=h, w=h, kh=k, kw=k, sh=st, sw=st, pt=p, pl=p, ow=(h + 2 * p - k) // st + 1)
SHAPES = [("vit_fc1", 1, 12608, 3072, 768, None), ("vit_fc2", 1, 12608, 768, 3072, None),
          ("vit_qkv", 1, 12608, 2304, 768, None), ("vit_proj", 1, 12608, 768, 768, None),
          ("vit_qk", 768, 197, 197, 64, None), ("vit_av", 768, 197, 64, 197, None),
          ("s1_fc1", 1, 200704, 384, 96, None), ("s1_fc2", 1, 200704, 96, 384, None), ("s1_qkv", 1, 200704, 288, 96, None),
          ("s2_fc1", 1, 50176, 768, 192, None), ("s2_fc2", 1, 50176, 192, 768, None),
          ("s3_fc1", 1, 12544, 1536, 384, None), ("s3_fc2", 1, 12544, 384, 1536, None), ("s3_qkv", 1, 12544, 1152, 384, None),
          ("s4_fc1", 1, 3136, 3072, 768, None), ("s4_fc2", 1, 3136, 768, 3072, None),
          ("swin_qk", 12288, 49, 49, 32, None),
          ("r18_c56", 64, 64, 3136, 576, G(64, 56, 3)), ("r18_c28", 64, 128, 784, 1152, G(128, 28, 3)),
          ("r18_c14", 64, 256, 196, 2304, G(256, 14, 3)), ("r18_c7", 64, 512, 49, 4608, G(512, 7, 3)),
          ("r18_stem", 64, 64, 12544, 147, G(3, 224, 7, 2)), ("r18_s2", 64, 128, 784, 576, G(64, 56, 3, 2)),
          ("r18_c56i", 64, 64, 3136, 576, None), ("r18_c7i", 64, 512, 49, 4608, None),
          ("d_c56", 64, 32, 3136, 1152, G(128, 56, 3)), ("d_c28", 64, 32, 784, 1152, G(128, 28, 3)),
          ("d_c14", 64, 32, 196, 1152, G(128, 14, 3)), ("d_c7", 64, 32, 49, 1152, G(128, 7, 3)),
          ("d_c56i", 64, 32, 3136, 1152, None),
          ("d_p56", 64, 128, 3136, 192, None), ("d_p28", 64, 128, 784, 512, None), ("d_p14", 64, 128, 196, 768, None),
          ("d_p7", 64, 128, 49, 768, None)]
def render(tpl, name, b, m, n, k, tile, g):
    tm, tn, tk, wm, wn = tile
    a_vec = 1 if k % 4 == 0 else 0
    b_vec = 0 if g or n % 4 else 1
    gv = {"GATHER": "true" if g else "false", "GH": g["h"] if g else 1, "GW": g["w"] if g else 1,
          "GKH": g["kh"] if g else 1, "GKW": g["kw"] if g else 1, "GSH": g["sh"] if g else 1, "GSW": g["sw"] if g else 1,
          "GDH": 1, "GDW": 1, "GPT": g["pt"] if g else 0, "GPL": g["pl"] if g else 0, "GOW": g["ow"] if g else 1}
    v = {"NAME": name, "M": m, "N": n, "K": k, "SA0": m * k, "SA1": k, "SA2": 1,
         "SB0": (g["c"] * g["h"] * g["w"] if g else k * n), "SB1": n, "SB2": 1,
         "IDX": "int", "TM": tm, "TN": tn, "TK": tk, "WM": wm, "WN": wn, "A_VEC": a_vec, "B_VEC": b_vec,
         "A_K_FAST": "true", "B_N_FAST": "true",
         "EPILOGUE": "#define EPILOGUE_PARAMS\n#define EPILOGUE_ARGS\n__device__ __forceinline__ float epilogue(float acc, idx_t, idx_t, idx_t, const float* __restrict__, const float* __restrict__) { return acc; }"}
    v.update(gv)
    out = tpl
    for key, val in v.items():
        out = out.replace("{{" + key + "}}", str(val))
    assert "{{" not in out, re.findall(r"{{\w+}}", out)
    return out
def main():
    variants = []  # (label, template path, tile)
    tpl = os.path.join(HERE, "..", "kernels", "gemm.cu")
    for arg in sys.argv[2:] or ["t%s:%s:%s" % (t, tpl, t) for t in DEFAULT_TILES]:
        label, path, tile = arg.split(":")
        variants.append((label, open(path).read(), tuple(int(x) for x in tile.split("x"))))
    src = ["#include <cstdio>\n#include <cstdlib>\n#include <cmath>\n#include <vector>\n#include <cublas_v2.h>\n#include <cuda_runtime.h>\n"]
    table = []
    for (sname, b, m, n, k, g) in SHAPES:
        for vi, (label, tpl, tile) in enumerate(variants):
            kname = f"k_{sname}_{vi}"
            src.append(f"namespace ns_{kname} {{\n" + render(tpl, kname, b, m, n, k, tile, g) + "\n}\n")
            tm, tn, tk, wm, wn = tile
            nb = b * g["c"] * g["h"] * g["w"] if g else b * k * n
            table.append(f'{{"{sname}", "{label}", {b}, {m}, {n}, {k}, {nb}, {1 if g else 0}, (const void*)ns_{kname}::{kname}, {(n + tn - 1)//tn}, {(m + tm - 1)//tm}, {tn//wn}, {tm//wm}}}')
    src.append(r'''
struct Case { const char* shape; const char* label; int b, m, n, k; long long nimg; int gathered; const void* fn; int gx, gy, tx, ty; };
static Case cases[] = {''' + ",\n".join(table) + r'''};
#define CK(x) do { cudaError_t e = (x); if (e != cudaSuccess) { printf("%s: %s\n", #x, cudaGetErrorString(e)); exit(1); } } while (0)
int main(int argc, char** argv) {
  const int reps = argc > 1 ? atoi(argv[1]) : 20;
  cublasHandle_t h; cublasCreate(&h); cublasSetMathMode(h, CUBLAS_PEDANTIC_MATH);
  cudaEvent_t e0, e1; cudaEventCreate(&e0); cudaEventCreate(&e1);
  const char* last = "";
  float *A = 0, *B = 0, *C = 0, *R = 0; double cublas_ms = 0;
  for (Case& c : cases) {
    const size_t na = (size_t)c.b * c.m * c.k, nb = std::max((size_t)c.b * c.k * c.n, (size_t)c.nimg), nc = (size_t)c.b * c.m * c.n;
    const double flop = 2.0 * c.b * c.m * c.n * c.k;
    if (strcmp(last, c.shape)) {
      last = c.shape;
      cudaFree(A); cudaFree(B); cudaFree(C); cudaFree(R);
      CK(cudaMalloc(&A, na * 4)); CK(cudaMalloc(&B, nb * 4)); CK(cudaMalloc(&C, nc * 4)); CK(cudaMalloc(&R, nc * 4));
      std::vector<float> hv(std::max(na, nb));
      for (size_t i = 0; i < hv.size(); ++i) hv[i] = (float)((i * 2654435761u) % 1000) / 1000.0f - 0.5f;
      CK(cudaMemcpy(A, hv.data(), na * 4, cudaMemcpyHostToDevice)); CK(cudaMemcpy(B, hv.data(), nb * 4, cudaMemcpyHostToDevice));
      const float one = 1, zero = 0;
      auto run = [&] { cublasSgemmStridedBatched(h, CUBLAS_OP_N, CUBLAS_OP_N, c.n, c.m, c.k, &one, B, c.n, (long long)c.k * c.n,
                                                 A, c.k, (long long)c.m * c.k, &zero, R, c.n, (long long)c.m * c.n, c.b); };
      for (int i = 0; i < 3; ++i) run();
      std::vector<float> t;
      for (int i = 0; i < reps; ++i) { cudaEventRecord(e0); run(); cudaEventRecord(e1); cudaEventSynchronize(e1); float ms; cudaEventElapsedTime(&ms, e0, e1); t.push_back(ms); }
      std::sort(t.begin(), t.end()); cublas_ms = t[t.size() / 2];
      printf("%-9s b%-5d %6d x %5d x %5d  cublas%s      %8.3f ms %6.1f TFLOP/s\n", c.shape, c.b, c.m, c.n, c.k, c.gathered ? "(im2col)" : "        ", cublas_ms, flop / cublas_ms / 1e9);
    }
    CK(cudaMemset(C, 0, nc * 4));
    void* args[] = {&C, &A, &B};
    dim3 grid(c.gx, c.gy, c.b), block(c.tx, c.ty);
    for (int i = 0; i < 3; ++i) CK(cudaLaunchKernel(c.fn, grid, block, args, 0, 0));
    CK(cudaDeviceSynchronize());
    std::vector<float> t;
    for (int i = 0; i < reps; ++i) { cudaEventRecord(e0); cudaLaunchKernel(c.fn, grid, block, args, 0, 0); cudaEventRecord(e1); cudaEventSynchronize(e1); float ms; cudaEventElapsedTime(&ms, e0, e1); t.push_back(ms); }
    std::sort(t.begin(), t.end()); const double ms = t[t.size() / 2];
    std::vector<float> hc(nc), hr(nc);
    CK(cudaMemcpy(hc.data(), C, nc * 4, cudaMemcpyDeviceToHost)); CK(cudaMemcpy(hr.data(), R, nc * 4, cudaMemcpyDeviceToHost));
    double err = 0, mag = 0;
    for (size_t i = 0; i < nc && !c.gathered; i += 97) { err = std::max(err, (double)fabsf(hc[i] - hr[i])); mag = std::max(mag, (double)fabsf(hr[i])); }
    printf("%-9s b%-5d %6d x %5d x %5d  %-10s  %8.3f ms %6.1f TFLOP/s  %.2fx cublas  err %.1e\n", c.shape, c.b, c.m, c.n, c.k, c.label, ms, flop / ms / 1e9, ms / cublas_ms, err / (mag + 1e-30));
  }
  return 0;
}
''')
    open(sys.argv[1], "w").write("\n".join(src).replace("#include <vector>", "#include <vector>\n#include <algorithm>\n#include <cstring>"))
main()
