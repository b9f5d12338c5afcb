// launch_layer_norm and layer_norm_workspace: layer_norm and rms_norm (kernels/layer_norm.cuh)
// for every floating dtype. The shape of a call (which team, how many blocks) is worked out by
// one function for both, so the workspace asked for is the one the launch uses.
#include "kernels/layer_norm.cuh"

namespace treduce::cuda {

namespace {

using lnorm::kTeamBlock;

// Blocks of the backward over rows in registers: about 512 threads a multiprocessor, each block
// one partial of dw and db a column (written, then read by the combine), so that the partials
// stay small beside x, g and dx (ViT-B's 12608 rows of 768: 528 partials, 3.2 MB of float32
// against 58 MB moved).
inline constexpr int kGradThreadsPerSm = 512;
// Rows in registers, (team, packs a thread): whole 16-byte packs, a warp a row up to 4 packs a
// lane (1024 bfloat16, 512 float32: shuffles alone), then blocks a row of 2 packs a thread (1 at
// 1024 threads backward, whose 64 registers a thread hold no more than x, g, w and the column
// sums of one pack; the forward holds 2 there: rows of 16384 bfloat16 took three reads, 71.6 us
// for (1024, 16384), torch.compile 28.7, H100); else single elements, 4 a thread, teams of 32 to
// 1024.
struct Team {
  int threads, packs;
  bool forward_only;
};
inline constexpr Team kPackTeams[] = {{4, 1, false},   {8, 1, false},    {16, 1, false},  {32, 1, false},
                                      {32, 2, false},  {32, 4, false},   {128, 2, false}, {256, 2, false},
                                      {512, 2, false}, {1024, 1, false}, {1024, 2, true}};
inline constexpr int kElementTeams[] = {32, 128, 512, 1024};
inline constexpr int kElementPacks = 4;

struct Shape {
  int team = 0;     // 0: a block a row (the loop kernels)
  int packs = 1;    // loads a thread
  bool vec = false;  // 16-byte packs, else single elements
  int64_t blocks = 0;
};

bool aligned(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

Shape shape_of(const LayerNormArgs& a, bool backward, int bytes) {
  Shape s;
  const int vec = 16 / bytes;
  s.vec = a.cols % vec == 0 && aligned(a.x) && aligned(a.weight) && aligned(a.bias) &&
          (backward ? aligned(a.grad) && aligned(a.grad_x) : aligned(a.y));
  if (s.vec) {
    for (const Team t : kPackTeams)
      if (int64_t(t.threads) * t.packs * vec >= a.cols && !(backward && t.forward_only)) {
        s.team = t.threads, s.packs = t.packs;
        break;
      }
  } else {
    for (const int t : kElementTeams)
      if (int64_t(t) * kElementPacks >= a.cols) {
        s.team = t, s.packs = kElementPacks;
        break;
      }
  }
  if (s.team == 0) {
    s.blocks = a.rows;
    return s;
  }
  const int block = s.team < lnorm::kLeastBlock ? lnorm::kLeastBlock : s.team;
  const int64_t teams = block / s.team;
  s.blocks = (a.rows + teams - 1) / teams;
  if (backward) s.blocks = std::min<int64_t>(s.blocks, int64_t(a.sm_count) * std::max(1, kGradThreadsPerSm / block));
  return s;
}

template <NormKind kKind, class T, int kTeam, int kPacks, int kVec>
cudaError_t launch_team(const LayerNormArgs& a, bool backward, int64_t blocks, cudaStream_t stream) {
  using Acc = NormAcc<T>;
  constexpr int kBlock = kTeamBlock<kTeam>;
  if (!backward) {
    lnorm::forward_kernel<kKind, T, Acc, kTeam, kPacks, kVec><<<unsigned(blocks), kBlock, 0, stream>>>(a);
    return cudaGetLastError();
  }
  // (more than 16 bytes a thread of 1024: forward only, kPackTeams)
  if constexpr (kTeam == 1024 && kPacks * kVec * sizeof(T) > 16) {
    return cudaErrorInvalidValue;
  } else {
    const size_t smem = kBlock / kTeam > 1 && (a.grad_weight || a.grad_bias) ? size_t(2 * a.cols) * sizeof(Acc) : 0;
    lnorm::backward_kernel<kKind, T, Acc, kTeam, kPacks, kVec><<<unsigned(blocks), kBlock, smem, stream>>>(a);
    const cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess || !(a.grad_weight || a.grad_bias)) return e;
    const int64_t column_blocks = (a.cols + 31) / 32;
    lnorm::weight_grads_kernel<T, Acc><<<unsigned(column_blocks), dim3(32, lnorm::kPartialsY), 0, stream>>>(a, blocks);
    return cudaGetLastError();
  }
}

template <NormKind kKind, class T>
cudaError_t launch_typed(const LayerNormArgs& a, bool backward, cudaStream_t stream) {
  using Acc = NormAcc<T>;
  constexpr int kVec = 16 / sizeof(T);
  const Shape s = shape_of(a, backward, int(sizeof(T)));
  if (s.blocks > 0x7fffffff) return cudaErrorInvalidValue;
  if (s.vec) {
    switch (s.team * 8 + s.packs) {  // (kPackTeams)
      case 4 * 8 + 1: return launch_team<kKind, T, 4, 1, kVec>(a, backward, s.blocks, stream);
      case 8 * 8 + 1: return launch_team<kKind, T, 8, 1, kVec>(a, backward, s.blocks, stream);
      case 16 * 8 + 1: return launch_team<kKind, T, 16, 1, kVec>(a, backward, s.blocks, stream);
      case 32 * 8 + 1: return launch_team<kKind, T, 32, 1, kVec>(a, backward, s.blocks, stream);
      case 32 * 8 + 2: return launch_team<kKind, T, 32, 2, kVec>(a, backward, s.blocks, stream);
      case 32 * 8 + 4: return launch_team<kKind, T, 32, 4, kVec>(a, backward, s.blocks, stream);
      case 128 * 8 + 2: return launch_team<kKind, T, 128, 2, kVec>(a, backward, s.blocks, stream);
      case 256 * 8 + 2: return launch_team<kKind, T, 256, 2, kVec>(a, backward, s.blocks, stream);
      case 512 * 8 + 2: return launch_team<kKind, T, 512, 2, kVec>(a, backward, s.blocks, stream);
      case 1024 * 8 + 1: return launch_team<kKind, T, 1024, 1, kVec>(a, backward, s.blocks, stream);
      case 1024 * 8 + 2: return launch_team<kKind, T, 1024, 2, kVec>(a, backward, s.blocks, stream);
      default: break;
    }
  } else {
    switch (s.team) {
      case 32: return launch_team<kKind, T, 32, kElementPacks, 1>(a, backward, s.blocks, stream);
      case 128: return launch_team<kKind, T, 128, kElementPacks, 1>(a, backward, s.blocks, stream);
      case 512: return launch_team<kKind, T, 512, kElementPacks, 1>(a, backward, s.blocks, stream);
      case 1024: return launch_team<kKind, T, 1024, kElementPacks, 1>(a, backward, s.blocks, stream);
      default: break;
    }
  }
  // A block a row.
  if (!backward) {
    lnorm::forward_loop_kernel<kKind, T, Acc><<<unsigned(s.blocks), lnorm::kLoopThreads, 0, stream>>>(a);
    return cudaGetLastError();
  }
  if (a.grad_x) {
    lnorm::backward_loop_kernel<kKind, T, Acc><<<unsigned(s.blocks), lnorm::kLoopThreads, 0, stream>>>(a);
    const cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess) return e;
  }
  if (a.grad_weight || a.grad_bias) {
    const int64_t column_blocks = (a.cols + 31) / 32;
    lnorm::columns_grads_kernel<kKind, T, Acc><<<unsigned(column_blocks), dim3(32, lnorm::kCombineY), 0, stream>>>(a);
  }
  return cudaGetLastError();
}

template <NormKind kKind>
cudaError_t launch_kind(const LayerNormArgs& a, bool backward, cudaStream_t stream) {
  return norm::visit_floating(a.dtype, [&](auto zero) { return launch_typed<kKind, decltype(zero)>(a, backward, stream); });
}

}  // namespace

size_t layer_norm_workspace(const LayerNormArgs& a) {
  if (!(a.grad_weight || a.grad_bias) || a.rows == 0 || a.cols == 0) return 0;
  const int bytes = a.dtype == DType::Double ? 8 : a.dtype == DType::Float ? 4 : 2;
  const Shape s = shape_of(a, true, bytes);
  if (s.team == 0) return 0;
  return size_t(2 * s.blocks * a.cols) * (a.dtype == DType::Double ? 8 : 4);
}

cudaError_t launch_layer_norm(const LayerNormArgs& a, bool backward, cudaStream_t stream) {
  if (a.cols == 0) return cudaSuccess;  // (the caller fills dw and db with zeros: no rows)
  if (a.rows == 0) return cudaSuccess;
  return a.kind == NormKind::Layer ? launch_kind<NormKind::Layer>(a, backward, stream)
                                   : launch_kind<NormKind::Rms>(a, backward, stream);
}

}  // namespace treduce::cuda
