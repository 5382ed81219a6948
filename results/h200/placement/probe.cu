// probe.cu: where the CUDA driver places cudaMalloc and cuMemAddressReserve ranges (README.md).
// Prints one line per call: sequence,op,index,bytes,address (hex),offset in MiB from the
// sequence's first allocation. Build: nvcc -O2 -o probe probe.cu -lcuda
#include <cuda.h>
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define RT(x) do { cudaError_t e_ = (x); if (e_ != cudaSuccess) { fprintf(stderr, "%s: %s\n", #x, cudaGetErrorString(e_)); exit(1); } } while (0)
#define DR(x) do { CUresult e_ = (x); if (e_ != CUDA_SUCCESS) { const char *s_; cuGetErrorString(e_, &s_); fprintf(stderr, "%s: %s\n", #x, s_); exit(1); } } while (0)
static const size_t MiB = 1 << 20;
static void *ptrs[4096]; static size_t sizes[4096]; static int n;
static const char *seq;
static unsigned long long first;
static int A(size_t mib) {
  RT(cudaMalloc(&ptrs[n], mib * MiB)); sizes[n] = mib * MiB;
  unsigned long long a = (unsigned long long)ptrs[n];
  if (!first) first = a;
  printf("%s,alloc,%d,%zu,0x%llx,%lld\n", seq, n, mib * MiB, a, ((long long)a - (long long)first) / (long long)MiB);
  return n++;
}
static void F(int i) { RT(cudaFree(ptrs[i])); printf("%s,free,%d,%zu,0x%llx,%lld\n", seq, i, sizes[i], (unsigned long long)ptrs[i], ((long long)(unsigned long long)ptrs[i] - (long long)first) / (long long)MiB); ptrs[i] = 0; }
static void all_free(void) { for (int i = 0; i < n; i++) if (ptrs[i]) RT(cudaFree(ptrs[i])); n = 0; first = 0; }
static void begin(const char *s) { all_free(); seq = s; }

int main(int argc, char **argv) {
  int s1n = 0;
  RT(cudaSetDevice(0)); RT(cudaFree(0));
  // S1: the sizes a caching allocator asked for in a recorded ResNet run, in order.
  begin("growth");
  size_t s1[] = {2,2,2,2,20,2,2,2,2,2,20,20,20,20,86,44,226,282,226,58,58,58,114,226,226,226,226,226,226,58,58,114,226,226,114,114,2,142,114,114,338,30,30,58,114,114,30,2,30,58,114,114,58,58,72,72,2,58,170,16,30,2,58,72,16,30};
  for (size_t i = 0; i < sizeof s1 / sizeof s1[0]; i++) A(s1[i]), s1n++;
  // S2: which sizes leave a tail that later small requests fill: X, then 2 MiB.
  begin("tail");
  size_t s2[] = {2,4,6,8,10,12,14,16,18,20,22,24,26,28,30,32,34,36,40,48,62,64,66,96,98,128,130,256,258,512,514,1024,1026,2048,2050,4096};
  for (size_t i = 0; i < sizeof s2 / sizeof s2[0]; i++) { A(s2[i]); A(2); }
  // S3: holes left by frees: which one a request takes.
  begin("holes");
  int a = A(226), b = A(114), c = A(226), d = A(58), e = A(226), f = A(114), g = A(58); (void)a; (void)c; (void)e; (void)g;
  F(b); F(d); F(f);
  A(58); A(58); A(2); A(100); A(114);
  F(a); F(c);
  A(226); A(200); A(20);
  // S4: the same sizes again after everything was freed.
  begin("again");
  for (size_t i = 0; i < sizeof s1 / sizeof s1[0]; i++) A(s1[i]);
  // S5: interleaved frees as under a cap: a segment freed, then a smaller one asked.
  begin("churn");
  int x[16];
  for (int i = 0; i < 8; i++) x[i] = A(i % 2 ? 114 : 226);
  F(x[1]); F(x[2]); F(x[5]);
  A(2); A(20); A(114); A(226); A(300);
  // S6: address reservations (expandable segments reserve a whole card's worth per stream).
  all_free(); seq = "reserve";
  CUdeviceptr r1, r2, r3; size_t total = 0, freeb = 0;
  RT(cudaMemGetInfo(&freeb, &total));
  size_t gran = 2 * MiB, big = (total + gran - 1) / gran * gran;
  DR(cuMemAddressReserve(&r1, big, 0, 0, 0));
  printf("reserve,reserve,0,%zu,0x%llx,0\n", big, (unsigned long long)r1);
  A(2); A(226);
  DR(cuMemAddressReserve(&r2, big, 0, 0, 0));
  printf("reserve,reserve,1,%zu,0x%llx,%lld\n", big, (unsigned long long)r2, ((long long)r2 - (long long)r1) / (long long)MiB);
  DR(cuMemAddressReserve(&r3, 64 * MiB, 0, 0, 0));
  printf("reserve,reserve,2,%zu,0x%llx,%lld\n", (size_t)64 * MiB, (unsigned long long)r3, ((long long)r3 - (long long)r1) / (long long)MiB);
  DR(cuMemAddressFree(r1, big)); DR(cuMemAddressFree(r2, big)); DR(cuMemAddressFree(r3, 64 * MiB));
  all_free();
  (void)argc; (void)argv; (void)s1n;
  return 0;
}
